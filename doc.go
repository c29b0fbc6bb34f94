// Package eddy is the user API of Eddy, a stateful stream processor: build a
// job from sources, operators and sinks with generic functions, then run it.
//
//	env := eddy.New(eddy.Checkpoints("file://./eddy-data", 100*time.Millisecond))
//	points := eddy.FromSource(env, datagen.GPS(datagen.Seed(7), datagen.Events(1_000_000)))
//	byDriver := eddy.KeyBy(points, func(p *datagen.GPSPoint) string { return p.DriverID })
//	totals := eddy.Process(byDriver, &DistanceFn{})
//	eddy.ToSink(totals, file.JSONLines[Total]("./out"))
//	err := env.Run(ctx)
//
// Records travel between subtasks (goroutines) in batches over bounded
// channels; checkpoint barriers travel with them. Keyed state lives in the
// state package and is snapshotted at each barrier; sinks commit their output
// when a checkpoint completes, so the committed output is exactly-once.
package eddy
