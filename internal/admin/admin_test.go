package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddyflow/eddy/internal/runtime"
)

func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:8081", false, true},
		{"127.0.0.2:0", false, true},
		{"localhost:0", false, true},
		{"[::1]:8081", false, true},
		{"0.0.0.0:8081", false, false},
		{":8081", false, false},
		{"[::]:8081", false, false},
		{"10.1.2.3:8081", false, false},
		{"eddy.example.com:8081", false, false},
		{"0.0.0.0:8081", true, true},
		{":8081", true, true},
		{"127.0.0.1", false, false}, // no port
	} {
		err := CheckAddr(c.addr, c.remote)
		if (err == nil) != c.ok {
			t.Errorf("CheckAddr(%q, %v) = %v", c.addr, c.remote, err)
		}
		if err != nil && strings.Contains(c.addr, ":80") && !errors.Is(err, ErrNotLoopback) {
			t.Errorf("CheckAddr(%q): %v is not ErrNotLoopback", c.addr, err)
		}
	}
}

// TestNotRunning: before a Run (or after it), /readyz answers 503 and the
// API answers with an empty history; without a way to take savepoints, a
// request for one answers 501.
func TestNotRunning(t *testing.T) {
	m := runtime.NewMetrics(&runtime.Graph{}, &runtime.Counters{})
	s := &Server{cfg: Config{Job: "j", Metrics: m, Gatherer: prometheus.NewRegistry()}, sampler: newSampler(m)}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not running") {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	code, body := get("/api/checkpoints")
	var cps Checkpoints
	if err := json.Unmarshal([]byte(body), &cps); code != http.StatusOK || err != nil || cps.History == nil || len(cps.History) != 0 {
		t.Errorf("/api/checkpoints: %d %s (%v)", code, body, err)
	}
	code, body = get("/api/job")
	var job Job
	if err := json.Unmarshal([]byte(body), &job); code != http.StatusOK || err != nil || job.Ready || job.Job != "j" {
		t.Errorf("/api/job: %d %s (%v)", code, body, err)
	}
	resp, err := http.Post(srv.URL+"/api/savepoint", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(b), "savepoints") {
		t.Errorf("POST /api/savepoint: %s %s", resp.Status, b)
	}
	if code, _ := get("/api/savepoint"); code == http.StatusOK {
		t.Errorf("GET /api/savepoint: %d", code)
	}
	if code, body := get("/app.js"); code != http.StatusOK || !strings.Contains(body, "api/checkpoints") {
		t.Errorf("/app.js: %d", code)
	}
}
