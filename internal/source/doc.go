// Package source owns the loop of a source subtask: it opens the subtask's
// splits of a connector.Source (at their restored positions), reads them
// round-robin, pushes each record into the subtask's operator chain,
// derives watermarks from the records' event times (bounded
// out-of-orderness, idle splits, alignment with the source's other
// subtasks through shared watermark slots), injects a checkpoint barrier
// with the splits' positions when the coordinator triggers one, and
// reports the end of its input.
//
// Records enter from the connector's split readers and leave through the
// Push the runtime gives the Loop; barriers, watermarks, idleness and end
// of data leave through the Host, which is the runtime's subtask; triggers
// enter on the Loop's Triggers channel.
package source
