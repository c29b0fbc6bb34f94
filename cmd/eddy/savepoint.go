package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// savepointCmd asks a running job's admin endpoint (eddy.Admin, or the
// demo's --admin) for a savepoint and prints its checkpoint id.
func savepointCmd(args []string, stdout, stderr io.Writer) int {
	return adminSavepoint("savepoint", "/api/savepoint", args, stdout, stderr)
}

// stopCmd asks a running job's admin endpoint to stop the job after a
// savepoint (--savepoint is required: a stop always takes one).
func stopCmd(args []string, stdout, stderr io.Writer) int {
	return adminSavepoint("stop", "/api/stop", args, stdout, stderr)
}

// adminSavepoint is eddy savepoint and eddy stop --savepoint: a POST to
// path of the admin endpoint, which answers with the savepoint's id.
func adminSavepoint(cmd, path string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("admin", "", "the running job's admin endpoint, host:port (as given to eddy.Admin or demo --admin)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the savepoint to complete")
	withSavepoint := false
	if cmd == "stop" {
		fs.BoolVar(&withSavepoint, "savepoint", false, "take a savepoint, then stop the job (required)")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := "usage: eddy savepoint --admin HOST:PORT [--timeout D]"
	if cmd == "stop" {
		usage = "usage: eddy stop --savepoint --admin HOST:PORT [--timeout D]"
	}
	if *addr == "" || fs.NArg() > 0 || cmd == "stop" && !withSavepoint {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		fmt.Fprintf(stderr, "eddy %s: --admin %q is no host:port\n", cmd, *addr)
		return 2
	}
	u.Path = path
	q := url.Values{"timeout": {timeout.String()}}
	if cmd == "stop" {
		q.Set("savepoint", "true")
	}
	u.RawQuery = q.Encode()
	client := &http.Client{Timeout: *timeout + 10*time.Second}
	resp, err := client.Post(u.String(), "application/json", nil)
	if err != nil {
		fmt.Fprintf(stderr, "eddy %s: %s: %v (is the job running with its admin endpoint there?)\n", cmd, u.Host, err)
		return 1
	}
	defer resp.Body.Close()
	var body struct {
		ID    uint64 `json:"id"`
		Error string `json:"error"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(data, &body); err != nil {
		fmt.Fprintf(stderr, "eddy %s: %s answered %s with %q, not the admin API's JSON\n", cmd, u.Host, resp.Status, data)
		return 1
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "eddy %s: %s: %s: %s\n", cmd, u.Host, resp.Status, body.Error)
		return 1
	}
	fmt.Fprintf(stdout, "savepoint complete: checkpoint %d (kept by retention until savepoints/%020d is deleted from the checkpoint store)\n", body.ID, body.ID)
	if cmd == "stop" {
		fmt.Fprintln(stdout, "the job is stopping; run it again to resume from its newest checkpoint")
	}
	return 0
}
