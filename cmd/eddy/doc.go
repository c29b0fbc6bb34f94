// Command eddy is Eddy's command-line tool.
//
//	eddy demo [flags]                   run the main job (see eddy demo -h)
//	eddy nexmark gen --events N --seed S [--rate R] --out FILE
//	                                    the Nexmark benchmark's events as JSON lines
//	eddy nexmark run --query q0,...|all --events N --seed S [--rate R] [--parallelism P]
//	                 [--checkpoint-interval D] [--out DIR]
//	                                    the Nexmark queries on those events: results in
//	                                    DIR/qN/, or discarded and throughput printed
//	eddy serde [--seed N] [--events N]  serde showcase on sample order events
//	eddy schema proto                   print the .proto of the demo's event types
//	eddy schema show [--type T]         print a demo type's schema (JSON or --binary)
//	eddy schema check [--key] OLD NEW   compare two saved schemas
package main
