package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/faulty"
	blobs3 "github.com/eddyflow/eddy/blob/s3"
)

// The n-th request of a method meets the same fate for the same seed,
// however requests of other methods interleave; another seed gives
// another sequence; the fates come at their rates.
func TestDecisionsDeterministic(t *testing.T) {
	cfg := FaultConfig{Seed: 7, ErrorRate: 0.1, ErrorAfterRate: 0.1, ResetRate: 0.1, StallRate: 0.1,
		Latency: faulty.LongTail(time.Millisecond, 10*time.Millisecond, 50*time.Millisecond)}
	const n = 20000
	// One decider sees PUTs and GETs alternate, another all PUTs first.
	alt, seq := newDecider(cfg), newDecider(cfg)
	var altPut, altGet, seqPut, seqGet []decision
	for range n {
		altPut = append(altPut, alt.next(http.MethodPut))
		altGet = append(altGet, alt.next(http.MethodGet))
	}
	for range n {
		seqPut = append(seqPut, seq.next(http.MethodPut))
	}
	for range n {
		seqGet = append(seqGet, seq.next(http.MethodGet))
	}
	for i := range n {
		if altPut[i] != seqPut[i] {
			t.Fatalf("PUT %d: %+v interleaved with GETs, %+v alone", i, altPut[i], seqPut[i])
		}
		if altGet[i] != seqGet[i] {
			t.Fatalf("GET %d: %+v interleaved with PUTs, %+v alone", i, altGet[i], seqGet[i])
		}
	}
	// PUTs and GETs draw from generators of their own.
	same := 0
	for i := range n {
		if altPut[i] == altGet[i] {
			same++
		}
	}
	if same > n/100 {
		t.Errorf("%d of %d PUT and GET decisions are equal: the methods share a generator", same, n)
	}
	other := newDecider(FaultConfig{Seed: 8, ErrorRate: 0.1, ErrorAfterRate: 0.1, ResetRate: 0.1, StallRate: 0.1, Latency: cfg.Latency})
	diff := 0
	for i := range n {
		if other.next(http.MethodPut) != seqPut[i] {
			diff++
		}
	}
	if diff < n/2 {
		t.Errorf("seed 8 gives %d of %d PUT decisions different from seed 7's, want most", diff, n)
	}

	var count [5]int
	status := map[int]int{}
	for _, d := range seqPut {
		count[d.fault]++
		if d.fault == faultError || d.fault == faultErrorAfter {
			status[d.status]++
		} else if d.status != 0 {
			t.Fatalf("a %v decision has status %d", d.fault, d.status)
		}
	}
	for f, want := range map[fault]float64{noFault: 0.6, faultError: 0.1, faultErrorAfter: 0.1, faultReset: 0.1, faultStall: 0.1} {
		got := float64(count[f]) / n
		if math.Abs(got-want) > 0.015 {
			t.Errorf("%v: %.3f of the requests, want %.2f", f, got, want)
		}
	}
	if s := float64(status[503]) / float64(status[500]+status[503]); len(status) != 2 || math.Abs(s-0.5) > 0.05 {
		t.Errorf("error statuses %v: want 500 and 503 half each", status)
	}
}

// Latency is drawn from the distribution and scaled; a zero config
// injects nothing; a rate of 1 injects its fault into every request.
func TestDecisionsLatencyAndRates(t *testing.T) {
	zero := newDecider(FaultConfig{Seed: 1})
	for range 1000 {
		if d := zero.next(http.MethodGet); d != (decision{}) {
			t.Fatalf("zero config decided %+v", d)
		}
	}
	scaled := newDecider(FaultConfig{Seed: 1, Latency: faulty.Fixed(time.Second), Scale: 0.01})
	if d := scaled.next(http.MethodGet); d.delay != 10*time.Millisecond {
		t.Errorf("Fixed(1s) scaled by 0.01: delay %v, want 10ms", d.delay)
	}
	for _, c := range []struct {
		cfg  FaultConfig
		want fault
	}{
		{FaultConfig{ErrorRate: 1}, faultError},
		{FaultConfig{ErrorAfterRate: 1}, faultErrorAfter},
		{FaultConfig{ResetRate: 1}, faultReset},
		{FaultConfig{StallRate: 1}, faultStall},
	} {
		d := newDecider(c.cfg)
		for range 1000 {
			if got := d.next(http.MethodPut).fault; got != c.want {
				t.Fatalf("%+v: decided %v, want %v", c.cfg, got, c.want)
			}
		}
	}
}

func TestFaultConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  FaultConfig
		want string
	}{
		{FaultConfig{ErrorRate: -0.1}, "FaultConfig.ErrorRate = -0.1"},
		{FaultConfig{StallRate: 1.5}, "FaultConfig.StallRate = 1.5"},
		{FaultConfig{ResetRate: math.NaN()}, "FaultConfig.ResetRate = NaN"},
		{FaultConfig{ErrorRate: 0.6, ErrorAfterRate: 0.6}, "add up to 1.2"},
	} {
		if err := c.cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
	if err := (FaultConfig{ErrorRate: 0.5, ErrorAfterRate: 0.25, ResetRate: 0.25}).validate(); err != nil {
		t.Errorf("rates adding up to 1: %v", err)
	}
}

// target is an HTTP server standing in for S3: it answers every request
// with body and counts the requests that reached it.
func target(t *testing.T, body []byte) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.Header().Set("ETag", `"abc"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// get sends a GET through the proxy with a client of its own (so closing
// the proxy does not wait on a pooled connection of another test).
func get(t *testing.T, p *FaultProxy) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+"/bucket/key", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return c.Do(req)
}

// Each fault, at rate 1, does at the HTTP level what it says: errors are
// S3 XML errors (before forwarding, the server never saw the request);
// a reset cuts the body half-way with a connection reset; a stall sends
// half the body and then nothing until the proxy is closed.
func TestFaultsOnTheWire(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	t.Run("None", func(t *testing.T) {
		srv, hits := target(t, body)
		p := NewFaultProxy(t, srv.URL, FaultConfig{})
		resp, err := get(t, p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) || resp.Header.Get("ETag") != `"abc"` {
			t.Fatalf("through a proxy without faults: %d bytes, ETag %q, %v", len(got), resp.Header.Get("ETag"), err)
		}
		if hits.Load() != 1 || p.Stats() != (FaultStats{Requests: 1}) {
			t.Errorf("server hits %d, stats %+v; want 1 and 1 request", hits.Load(), p.Stats())
		}
	})
	for _, c := range []struct {
		cfg      FaultConfig
		wantHits int64
		stats    FaultStats
	}{
		{FaultConfig{Seed: 1, ErrorRate: 1}, 0, FaultStats{Requests: 1, Errors: 1}},
		{FaultConfig{Seed: 1, ErrorAfterRate: 1}, 1, FaultStats{Requests: 1, ErrorsAfter: 1}},
	} {
		t.Run(c.cfg.name(), func(t *testing.T) {
			srv, hits := target(t, body)
			p := NewFaultProxy(t, srv.URL, c.cfg)
			resp, err := get(t, p)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 500 && resp.StatusCode != 503 ||
				!strings.Contains(string(got), "<Error><Code>") || !strings.Contains(string(got), "<Resource>/bucket/key</Resource>") ||
				resp.Header.Get("Content-Type") != "application/xml" || resp.Header.Get("X-Amz-Request-Id") == "" {
				t.Errorf("status %d, headers %v, body %s: want an S3 XML error", resp.StatusCode, resp.Header, got)
			}
			if hits.Load() != c.wantHits {
				t.Errorf("the server saw %d requests, want %d", hits.Load(), c.wantHits)
			}
			if p.Stats() != c.stats {
				t.Errorf("stats %+v, want %+v", p.Stats(), c.stats)
			}
		})
	}
	t.Run("Reset", func(t *testing.T) {
		srv, hits := target(t, body)
		p := NewFaultProxy(t, srv.URL, FaultConfig{ResetRate: 1})
		resp, err := get(t, p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(got) != len(body)/2 || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("read %d of %d bytes, then %v; want half, then a connection reset", len(got), len(body), err)
		}
		if hits.Load() != 1 || p.Stats() != (FaultStats{Requests: 1, Resets: 1}) {
			t.Errorf("server hits %d, stats %+v; want 1 and 1 reset", hits.Load(), p.Stats())
		}
	})
	t.Run("Stall", func(t *testing.T) {
		srv, _ := target(t, body)
		p := NewFaultProxy(t, srv.URL, FaultConfig{StallRate: 1})
		resp, err := get(t, p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		half := make([]byte, len(body)/2)
		if _, err := io.ReadFull(resp.Body, half); err != nil {
			t.Fatalf("the first half of a stalled body: %v", err)
		}
		// The body stalls now; closing the proxy ends it.
		var wg sync.WaitGroup
		var rest []byte
		var readErr error
		wg.Go(func() { rest, readErr = io.ReadAll(resp.Body) })
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		wg.Wait()
		if len(rest) != 0 || readErr == nil {
			t.Errorf("after the stall the body gave %d more bytes and %v; want none and an error", len(rest), readErr)
		}
		if p.Stats() != (FaultStats{Requests: 1, Stalls: 1}) {
			t.Errorf("stats %+v, want 1 stall", p.Stats())
		}
	})
	t.Run("StallEndsWhenClientLeaves", func(t *testing.T) {
		srv, _ := target(t, body)
		p := NewFaultProxy(t, srv.URL, FaultConfig{StallRate: 1})
		resp, err := get(t, p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Close waits for the stalled handler, which ended when the
		// client closed its connection.
		done := make(chan struct{})
		go func() { p.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return within 5s of a stalled request whose client left")
		}
	})
	t.Run("Latency", func(t *testing.T) {
		srv, _ := target(t, body)
		p := NewFaultProxy(t, srv.URL, FaultConfig{Latency: faulty.Fixed(50 * time.Millisecond)})
		start := time.Now()
		resp, err := get(t, p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("a request with 50ms latency took %v", d)
		}
		if s := p.Stats(); s.Latency != 50*time.Millisecond {
			t.Errorf("stats %+v, want 50ms latency", s)
		}
	})
	t.Run("Filter", func(t *testing.T) {
		srv, hits := target(t, body)
		p := NewFaultProxy(t, srv.URL, FaultConfig{ErrorRate: 1, Filter: func(r *http.Request) bool { return r.Method == http.MethodPut }})
		resp, err := get(t, p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || hits.Load() != 1 || p.Stats() != (FaultStats{Requests: 1, Bypassed: 1}) {
			t.Errorf("a GET past a PUT-only filter: status %d, server hits %d, stats %+v", resp.StatusCode, hits.Load(), p.Stats())
		}
	})
}

// name names a config of one fault at rate 1 for a subtest.
func (c FaultConfig) name() string {
	switch {
	case c.ErrorRate == 1:
		return "Error"
	case c.ErrorAfterRate == 1:
		return "ErrorAfter"
	case c.ResetRate == 1:
		return "Reset"
	case c.StallRate == 1:
		return "Stall"
	}
	return fmt.Sprintf("%+v", c)
}

// noProbe spares blob/s3.New's probe: its ListObjectsV2 and the requests on its probe object.
func noProbe(r *http.Request) bool {
	return !r.URL.Query().Has("list-type") && !strings.Contains(r.URL.Path, ".eddy-probe-")
}

// errorCode returns the S3 error code of err, or "".
func errorCode(err error) string {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Each fault at rate 1 makes the store's Put and Get fail with an error
// (within the stall timeout for a stall) and is counted.
func TestFaultsThroughStore(t *testing.T) {
	srv := Versitygw(t)
	srv.CreateBucket(t, "faults")
	direct := srv.Open(t, "faults", "kinds")
	payload := bytes.Repeat([]byte("eddy"), 4096)
	if err := direct.Put(context.Background(), "there", payload); err != nil {
		t.Fatal(err)
	}
	const stall = 300 * time.Millisecond
	for _, c := range []struct {
		cfg   FaultConfig
		stats FaultStats
		want  func(err error) bool
	}{
		{FaultConfig{ErrorRate: 1}, FaultStats{Errors: 2},
			func(err error) bool { c := errorCode(err); return c == "InternalError" || c == "SlowDown" }},
		{FaultConfig{ErrorAfterRate: 1}, FaultStats{ErrorsAfter: 2},
			func(err error) bool { c := errorCode(err); return c == "InternalError" || c == "SlowDown" }},
		{FaultConfig{ResetRate: 1}, FaultStats{Resets: 2}, func(err error) bool { return err != nil }},
		{FaultConfig{StallRate: 1}, FaultStats{Stalls: 2}, func(err error) bool { return err != nil }},
	} {
		c.cfg.Filter = noProbe
		c.stats.Requests, c.stats.Bypassed = 3, 1 // the probe, a Put and a Get
		t.Run(c.cfg.name(), func(t *testing.T) {
			p := NewFaultProxy(t, srv.Endpoint, c.cfg)
			s := srv.Via(p).Open(t, "faults", "kinds", blobs3.MaxAttempts(1), blobs3.StallTimeout(stall), blobs3.ReadOnly()) // no write probe
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := s.Put(ctx, "here", payload)
			if !c.want(err) || !strings.Contains(err.Error(), `put "here" in s3://faults/kinds/ at `+p.Endpoint) {
				t.Errorf("Put: %v", err)
			}
			_, err = s.Get(ctx, "there")
			if !c.want(err) || errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), `get "there"`) {
				t.Errorf("Get: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Put and Get took %v", d)
			}
			if ctx.Err() != nil {
				t.Errorf("the calls ended only with their context")
			}
			if got := p.Stats(); got != c.stats {
				t.Errorf("stats %+v, want %+v", got, c.stats)
			}
		})
	}
}

// An error injected after the server did the work leaves the object
// written although the client saw the PUT fail; one injected before
// leaves it unwritten.
func TestErrorAfterPutLands(t *testing.T) {
	srv := Versitygw(t)
	srv.CreateBucket(t, "after")
	direct := srv.Open(t, "after", "p")
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		cfg    FaultConfig
		landed bool
	}{
		{"after", FaultConfig{ErrorAfterRate: 1}, true},
		{"before", FaultConfig{ErrorRate: 1}, false},
	} {
		c.cfg.Filter = func(r *http.Request) bool { return r.Method == http.MethodPut }
		p := NewFaultProxy(t, srv.Endpoint, c.cfg)
		s := srv.Via(p).Open(t, "after", "p", blobs3.ReadOnly()) // no write probe
		data := []byte("written " + c.name + " the error")
		if err := s.Put(ctx, c.name, data); err == nil {
			t.Fatalf("%s: Put through the proxy succeeded", c.name)
		}
		got, err := direct.Get(ctx, c.name)
		switch {
		case c.landed && (err != nil || !bytes.Equal(got, data)):
			t.Errorf("error %s the work: the object holds %q, %v; want %q", c.name, got, err, data)
		case !c.landed && !errors.Is(err, blob.ErrNotFound):
			t.Errorf("error %s the work: Get = %q, %v; want not found", c.name, got, err)
		}
	}
}

// With moderate fault rates and a short latency tail, a workload of
// hedged Puts and Gets completes and every Get returns what was Put.
func TestWorkloadUnderFaults(t *testing.T) {
	srv := Versitygw(t)
	srv.CreateBucket(t, "workload")
	p := NewFaultProxy(t, srv.Endpoint, FaultConfig{
		Seed: 42, ErrorRate: 0.05, ErrorAfterRate: 0.03, ResetRate: 0.03, StallRate: 0.01,
		Latency: faulty.LongTail(time.Millisecond, 5*time.Millisecond, 20*time.Millisecond),
		Filter:  noProbe,
	})
	s := srv.Via(p).Open(t, "workload", "w", blobs3.StallTimeout(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	puts, gets := blob.NewHedger(3, 200*time.Millisecond), blob.NewHedger(3, 200*time.Millisecond)
	const objects, attempts = 100, 6
	data := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("object %d;", i)), 100*(i%10+1)) }
	var wg sync.WaitGroup
	errs := make(chan error, objects)
	sem := make(chan struct{}, 8)
	for i := range objects {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fmt.Sprintf("o/%03d", i)
			if err := puts.Put(ctx, s, name, data(i), attempts); err != nil {
				errs <- err
				return
			}
			var buf []byte
			got, err := gets.GetInto(ctx, s, name, &buf, attempts)
			if err != nil {
				errs <- err
			} else if !bytes.Equal(got, data(i)) {
				errs <- fmt.Errorf("%s: got %d bytes, not the %d put", name, len(got), len(data(i)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := p.Stats()
	t.Logf("proxy: %+v", st)
	if st.Errors == 0 || st.ErrorsAfter+st.Resets+st.Stalls == 0 {
		t.Errorf("stats %+v: the workload met too few faults to mean anything", st)
	}
}

// blob.Open reaches a server through the proxy with Server.URL and the
// credentials of Server.Env, as a child process given them does.
func TestOpenURLViaProxy(t *testing.T) {
	srv := Versitygw(t)
	srv.CreateBucket(t, "url")
	p := NewFaultProxy(t, srv.Endpoint, FaultConfig{})
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	u := srv.Via(p).URL("url", "job/1")
	s, err := blob.Open(u)
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "a", []byte("through the proxy")); err != nil {
		t.Fatal(err)
	}
	got, err := srv.Open(t, "url", "job/1").Get(ctx, "a")
	if err != nil || string(got) != "through the proxy" {
		t.Fatalf("the object on the server: %q, %v", got, err)
	}
	if st := p.Stats(); st.Requests != 5 { // the probe (list, put, get, delete) and the Put
		t.Errorf("proxy stats %+v, want 5 requests", st)
	}
}

// The same seed and the same sequence of store calls meet the same
// faults end to end: each call's outcome and the proxy's counts agree
// between two runs.
func TestSameSeedSameFaults(t *testing.T) {
	srv := Versitygw(t)
	srv.CreateBucket(t, "seeded")
	run := func(prefix string) (outcomes []bool, st FaultStats) {
		p := NewFaultProxy(t, srv.Endpoint, FaultConfig{Seed: 99, ErrorRate: 0.1, ErrorAfterRate: 0.1, ResetRate: 0.1, Filter: noProbe})
		s := srv.Via(p).Open(t, "seeded", prefix, blobs3.MaxAttempts(1))
		ctx := context.Background()
		for i := range 30 {
			name := fmt.Sprintf("o%d", i)
			outcomes = append(outcomes, s.Put(ctx, name, bytes.Repeat([]byte{byte(i)}, 1000)) == nil)
			_, err := s.Get(ctx, name)
			outcomes = append(outcomes, err == nil)
		}
		return outcomes, p.Stats()
	}
	a, sa := run("a")
	b, sb := run("b")
	if fmt.Sprint(a) != fmt.Sprint(b) || sa != sb {
		t.Errorf("same seed, different runs:\n%v %+v\n%v %+v", a, sa, b, sb)
	}
	if sa.Errors+sa.ErrorsAfter+sa.Resets == 0 {
		t.Errorf("stats %+v: no fault met", sa)
	}
}
