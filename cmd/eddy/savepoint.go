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
	fs := flag.NewFlagSet("savepoint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("admin", "", "the running job's admin endpoint, host:port (as given to eddy.Admin or demo --admin)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the savepoint to complete")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: eddy savepoint --admin HOST:PORT [--timeout D]")
		return 2
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		fmt.Fprintf(stderr, "eddy savepoint: --admin %q is no host:port\n", *addr)
		return 2
	}
	u.Path = "/api/savepoint"
	u.RawQuery = url.Values{"timeout": {timeout.String()}}.Encode()
	client := &http.Client{Timeout: *timeout + 10*time.Second}
	resp, err := client.Post(u.String(), "application/json", nil)
	if err != nil {
		fmt.Fprintf(stderr, "eddy savepoint: %s: %v (is the job running with its admin endpoint there?)\n", u.Host, err)
		return 1
	}
	defer resp.Body.Close()
	var body struct {
		ID    uint64 `json:"id"`
		Error string `json:"error"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(data, &body); err != nil {
		fmt.Fprintf(stderr, "eddy savepoint: %s answered %s with %q, not the admin API's JSON\n", u.Host, resp.Status, data)
		return 1
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "eddy savepoint: %s: %s: %s\n", u.Host, resp.Status, body.Error)
		return 1
	}
	fmt.Fprintf(stdout, "savepoint complete: checkpoint %d (kept by retention until savepoints/%020d is deleted from the checkpoint store)\n", body.ID, body.ID)
	return 0
}
