// Package graph owns the identities of a job graph: every checkpointed
// thing (source, keyed or window operator, sink) has one id, unique in the
// job, under which its state, positions or transactions are stored in
// checkpoints. The root package records a Node for each as the job is
// built, with the place in the user's code that declared it; Check refuses
// a graph where two share an id, naming both places, before anything runs.
package graph
