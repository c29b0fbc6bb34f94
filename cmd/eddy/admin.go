package main

import (
	"fmt"
	"io"

	"github.com/eddyflow/eddy"
)

// printAdminURL waits until Run has bound env's admin endpoint and prints
// the page's URL, or until Run has ended (its error is put back in done,
// which must have room for it).
func printAdminURL(env *eddy.Env, done chan error, stdout io.Writer) {
	select {
	case <-env.AdminListening():
		fmt.Fprintf(stdout, "eddy demo: admin page at http://%s/ (Prometheus metrics at /metrics)\n", env.AdminAddr())
	case err := <-done:
		done <- err
	}
}
