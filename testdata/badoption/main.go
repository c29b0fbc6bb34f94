// This program must not compile: WithParallelism means nothing on Reduce
// (a keyed operator runs in the stage its KeyBy starts), so Reduce does not
// take it. TestOptionsAreTyped checks that the compiler says so.
package main

import (
	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
)

func main() {
	env := eddy.New()
	ks := eddy.KeyBy(eddy.FromSource(env, datagen.GPS()), func(p *datagen.GPSPoint) string { return p.DriverID })
	eddy.Reduce(ks, func(a, b datagen.GPSPoint) datagen.GPSPoint { return a }, eddy.WithParallelism(4))
}
