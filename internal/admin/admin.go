package admin

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eddyflow/eddy/internal/runtime"
)

//go:embed web
var webFS embed.FS

// Config is what a Server serves and where.
type Config struct {
	Addr        string // host:port; port 0 picks a free one
	AllowRemote bool   // bind a non-loopback address too
	Job         string
	Metrics     *runtime.Metrics
	Gatherer    prometheus.Gatherer
	Logger      *slog.Logger
	SampleEvery time.Duration // how often rates are sampled; default 1 s
	// Savepoint takes a savepoint and returns its checkpoint id; nil:
	// POST /api/savepoint answers 501.
	Savepoint func(ctx context.Context) (uint64, error)
	// StopWithSavepoint takes a savepoint and stops the job; nil: POST
	// /api/stop answers 501.
	StopWithSavepoint func(ctx context.Context) (uint64, error)
}

// Server is a running admin endpoint.
type Server struct {
	cfg     Config
	ln      net.Listener
	srv     *http.Server
	sampler *sampler
	stop    chan struct{}
	done    sync.WaitGroup
}

// ErrNotLoopback is returned by Start for an address that is not a
// loopback one when Config.AllowRemote is not set.
var ErrNotLoopback = errors.New("not a loopback address")

// CheckAddr reports whether addr may be bound: a loopback host (127.0.0.0/8,
// ::1, localhost) unless allowRemote. An empty host means every interface.
func CheckAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("eddy: admin address %q: %w", addr, err)
	}
	if allowRemote {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("eddy: admin address %q: %w (the endpoint serves profiles and the job's internals): "+
		"bind it to 127.0.0.1 or localhost, or pass eddy.AdminAllowRemote() to expose it", addr, ErrNotLoopback)
}

// Start checks and binds cfg.Addr and serves in the background until Close.
func Start(cfg Config) (*Server, error) {
	if err := CheckAddr(cfg.Addr, cfg.AllowRemote); err != nil {
		return nil, err
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("eddy: admin endpoint: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, sampler: newSampler(cfg.Metrics), stop: make(chan struct{})}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.sampler.sample(time.Now())
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Warn("admin endpoint stopped", "err", err)
		}
	}()
	go func() {
		defer s.done.Done()
		t := time.NewTicker(cfg.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case now := <-t.C:
				s.sampler.sample(now)
			}
		}
	}()
	cfg.Logger.Info("admin endpoint listening", "url", s.URL())
	return s, nil
}

// Addr is the address the server is bound to (with the port chosen for
// port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the address of the web page.
func (s *Server) URL() string { return "http://" + s.Addr() + "/" }

// Close stops serving, waiting up to a second for requests in flight.
func (s *Server) Close() error {
	close(s.stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	s.done.Wait()
	return err
}

// Handler returns the endpoint's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slogLogger{s.cfg.Logger}}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /api/job", s.job)
	mux.HandleFunc("GET /api/checkpoints", s.checkpoints)
	mux.HandleFunc("POST /api/savepoint", s.savepoint)
	mux.HandleFunc("POST /api/stop", s.stopWithSavepoint)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	static, _ := fs.Sub(webFS, "web")
	mux.Handle("GET /", http.FileServerFS(static))
	return mux
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := s.cfg.Metrics.Readiness()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !rd.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		if !rd.Running {
			fmt.Fprintln(w, "not running")
		} else {
			fmt.Fprintf(w, "restoring: %d of %d subtasks running\n", rd.Started, rd.Total)
		}
		return
	}
	fmt.Fprintln(w, "ready")
}

// savepoint takes a savepoint, waiting up to ?timeout= (default 2 min) for
// it to complete: 200 with its id, 504 if it did not complete in time, 500
// if it failed.
func (s *Server) savepoint(w http.ResponseWriter, r *http.Request) {
	s.takeSavepoint(w, r, s.cfg.Savepoint)
}

// stopWithSavepoint is savepoint, then the job stops (POST /api/stop?savepoint=true;
// the savepoint is required, a stop without one is not offered).
func (s *Server) stopWithSavepoint(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("savepoint") != "true" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "stop takes savepoint=true: the job stops after a savepoint"})
		return
	}
	s.takeSavepoint(w, r, s.cfg.StopWithSavepoint)
}

func (s *Server) takeSavepoint(w http.ResponseWriter, r *http.Request, take func(context.Context) (uint64, error)) {
	if take == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this endpoint cannot take savepoints"})
		return
	}
	timeout := 2 * time.Minute
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("timeout %q: want a positive duration such as 30s", v)})
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	id, err := take(ctx)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"id": id})
	case errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusGatewayTimeout, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	_ = enc.Encode(v)
}

// slogLogger adapts a slog.Logger to promhttp's ErrorLog.
type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Println(v ...any) { l.l.Warn("serving /metrics", "err", fmt.Sprint(v...)) }
