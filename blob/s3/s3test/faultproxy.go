package s3test

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy/blob/faulty"
)

// FaultConfig says which faults a FaultProxy injects. The zero value
// injects none: the proxy then only forwards.
//
// Each request meets at most one fault (an error before or after
// forwarding, a reset or a stall): the rates are the probabilities of
// each, and must add up to at most 1. Latency is added to every request that is not bypassed,
// whatever else happens to it.
type FaultConfig struct {
	// Seed seeds the generators that decide the faults, one per HTTP
	// method: with the same seed, the n-th PUT (say) meets the same fate
	// however requests of other methods interleave with it.
	Seed uint64
	// Latency is the distribution of the delay added before a request is
	// forwarded (or answered with an error), e.g. faulty.LongTail(2ms,
	// 20ms, 100ms). Nil adds none.
	Latency faulty.Distribution
	// Scale multiplies every latency drawn from Latency, e.g. 0.01 to
	// model faulty.ObjectStore() 100× faster. Zero (or a negative value)
	// means 1.
	Scale float64
	// ErrorRate is the fraction of requests answered with 500
	// InternalError or 503 SlowDown (half each) before they are
	// forwarded: the server never sees them.
	ErrorRate float64
	// ErrorAfterRate is the fraction of requests that are forwarded and
	// whose response is then replaced by 500 InternalError or 503
	// SlowDown (half each): the server did the work (a PUT landed) but the
	// client sees an error.
	ErrorAfterRate float64
	// ResetRate is the fraction of requests that are forwarded and whose
	// connection is then reset (closed with RST): a response with a body
	// is cut after its headers and the first half of the body (right
	// after the headers if its length is unknown), one without a body is
	// not sent at all. The server did the work.
	ResetRate float64
	// StallRate is the fraction of requests that are forwarded and whose
	// response then stops: a response with a body after its headers and
	// the first half of the body, one without a body before its headers.
	// The proxy sends nothing more until the client gives up (closes the
	// connection) or the proxy is closed. The server did the work.
	StallRate float64
	// Filter, if not nil, chooses the requests the proxy may fault: a
	// request for which it returns false is forwarded untouched, draws
	// nothing from the generators and counts as Bypassed. Use it to spare
	// the probe blob/s3.New makes (a ListObjectsV2), or to fault only
	// PUTs. The proxy calls it one request at a time (under its lock), so
	// it may count the requests it sees without locking of its own.
	Filter func(r *http.Request) bool
}

// validate checks that the rates are probabilities that add up to at most
// one.
func (c FaultConfig) validate() error {
	sum := 0.0
	for _, r := range []struct {
		name string
		v    float64
	}{{"ErrorRate", c.ErrorRate}, {"ErrorAfterRate", c.ErrorAfterRate}, {"ResetRate", c.ResetRate}, {"StallRate", c.StallRate}} {
		if !(r.v >= 0 && r.v <= 1) {
			return fmt.Errorf("FaultConfig.%s = %v: want a fraction in [0, 1]", r.name, r.v)
		}
		sum += r.v
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("FaultConfig rates add up to %v: want at most 1 (each request meets at most one fault)", sum)
	}
	return nil
}

// fault is the kind of fault a FaultProxy injects into one request.
type fault int

// The faults, in the order a request's draw is matched against the rates.
const (
	noFault         fault = iota // forwarded and answered faithfully (latency aside)
	faultError                   // answered with 500 or 503 before forwarding
	faultErrorAfter              // forwarded, response replaced by 500 or 503
	faultReset                   // forwarded, connection reset mid-response
	faultStall                   // forwarded, response stalled mid-way
)

var faultNames = [...]string{"none", "error", "error-after", "reset", "stall"}

// String names the fault: "none", "error", "error-after", "reset" or
// "stall".
func (f fault) String() string {
	if f >= 0 && int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// FaultStats counts what a FaultProxy did.
type FaultStats struct {
	Requests    int64         // requests received
	Bypassed    int64         // requests the Filter passed untouched
	Errors      int64         // answered with an error before forwarding
	ErrorsAfter int64         // forwarded, then answered with an error
	Resets      int64         // forwarded, then reset
	Stalls      int64         // forwarded, then stalled
	Latency     time.Duration // total latency drawn (scaled) for the requests not bypassed
}

// decision is the fate of one request.
type decision struct {
	fault  fault
	status int // 500 or 503 for faultError and faultErrorAfter
	delay  time.Duration
}

// decider draws decisions from one seeded generator per method. It is not
// safe for concurrent use.
type decider struct {
	cfg   FaultConfig
	scale float64
	rngs  map[string]*rand.Rand
}

func newDecider(cfg FaultConfig) *decider {
	scale := cfg.Scale
	if !(scale > 0) {
		scale = 1
	}
	return &decider{cfg: cfg, scale: scale, rngs: make(map[string]*rand.Rand)}
}

// next draws the fate of the next request of method. Every request draws
// the same values in the same order (two Float64s, then a latency
// sample) whatever its fate, so the n-th request of a method meets a fate
// that depends on the seed and n only.
func (d *decider) next(method string) decision {
	rng := d.rngs[method]
	if rng == nil {
		h := fnv.New64a()
		h.Write([]byte(method))
		rng = rand.New(rand.NewPCG(d.cfg.Seed, h.Sum64()))
		d.rngs[method] = rng
	}
	u, uStatus := rng.Float64(), rng.Float64()
	var dec decision
	if d.cfg.Latency != nil {
		dec.delay = max(time.Duration(float64(d.cfg.Latency.Sample(rng))*d.scale), 0)
	}
	c := d.cfg
	switch {
	case u < c.ErrorRate:
		dec.fault = faultError
	case u < c.ErrorRate+c.ErrorAfterRate:
		dec.fault = faultErrorAfter
	case u < c.ErrorRate+c.ErrorAfterRate+c.ResetRate:
		dec.fault = faultReset
	case u < c.ErrorRate+c.ErrorAfterRate+c.ResetRate+c.StallRate:
		dec.fault = faultStall
	}
	if dec.fault == faultError || dec.fault == faultErrorAfter {
		dec.status = http.StatusInternalServerError
		if uStatus < 0.5 {
			dec.status = http.StatusServiceUnavailable
		}
	}
	return dec
}

// FaultProxy is a reverse proxy on 127.0.0.1 in front of an S3 endpoint
// that injects the faults of its FaultConfig. Clients reach the server
// through Endpoint with the server's own credentials: the proxy keeps the
// Host header, so request signatures stay valid.
type FaultProxy struct {
	// Endpoint is the proxy's URL, e.g. "http://127.0.0.1:41235"; use it
	// where the server's endpoint would go (see Server.Via).
	Endpoint string
	// Target is the URL of the endpoint the proxy forwards to.
	Target string

	target *url.URL
	srv    *http.Server
	tr     *http.Transport
	ctx    context.Context // cancelled by Close: stalls and delays end
	cancel context.CancelFunc

	mu       sync.Mutex
	dec      *decider // guarded by mu
	stats    FaultStats
	isClosed bool
	handlers sync.WaitGroup // requests in flight; added to under mu
	once     sync.Once
	server   map[string][]time.Duration // guarded by mu: forward times by operation
}

// NewFaultProxy starts a FaultProxy on a free port of 127.0.0.1 that
// forwards to target (an "http://host:port" endpoint such as
// Server.Endpoint) and injects the faults of cfg. It is closed at
// t.Cleanup; it fails the test if cfg's rates are not fractions adding up
// to at most 1 or target is not an http(s) URL.
func NewFaultProxy(t testing.TB, target string, cfg FaultConfig) *FaultProxy {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatalf("s3test: fault proxy for %s: %v", target, err)
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		t.Fatalf("s3test: fault proxy target %q: want an endpoint such as http://127.0.0.1:9000", target)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3test: fault proxy for %s: listen on 127.0.0.1: %v", target, err)
	}
	p := &FaultProxy{
		Endpoint: "http://" + l.Addr().String(),
		Target:   target,
		target:   u,
		dec:      newDecider(cfg),
		// The proxy passes bodies through as they are: it neither asks
		// for compression nor undoes it.
		tr: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64},
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.srv = &http.Server{Handler: p}
	go p.srv.Serve(l)
	t.Cleanup(func() { p.Close() })
	return p
}

// ServerTimes returns, by S3 operation ("PutObject", "UploadPart",
// "CompleteMultipartUpload", "GetObject", "ListObjectsV2", ...), how long
// each forwarded request took from forwarding until the response headers
// arrived: the server's time with the request body's transfer, without
// the latency the proxy injects. It shows where a slow operation's time
// goes on the server.
func (p *FaultProxy) ServerTimes() map[string][]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string][]time.Duration, len(p.server))
	for op, ds := range p.server {
		out[op] = append([]time.Duration(nil), ds...)
	}
	return out
}

// operation names the S3 operation of r.
func operation(r *http.Request) string {
	q := r.URL.Query()
	_, upload := q["uploadId"]
	_, uploads := q["uploads"]
	_, list := q["list-type"]
	switch {
	case r.Method == http.MethodPut && upload:
		return "UploadPart"
	case r.Method == http.MethodPut:
		return "PutObject"
	case r.Method == http.MethodPost && uploads:
		return "CreateMultipartUpload"
	case r.Method == http.MethodPost && upload:
		return "CompleteMultipartUpload"
	case r.Method == http.MethodDelete && upload:
		return "AbortMultipartUpload"
	case r.Method == http.MethodDelete:
		return "DeleteObject"
	case r.Method == http.MethodGet && list:
		return "ListObjectsV2"
	case r.Method == http.MethodGet:
		return "GetObject"
	case r.Method == http.MethodHead:
		return "HeadObject"
	}
	return r.Method
}

// Stats returns what the proxy has done so far.
func (p *FaultProxy) Stats() FaultStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops the proxy: it closes the listener and every connection,
// releases stalled responses and pending delays, and returns once every
// request in flight has ended. It is safe to call more than once.
func (p *FaultProxy) Close() error {
	var err error
	p.once.Do(func() {
		p.mu.Lock()
		p.isClosed = true
		p.mu.Unlock()
		p.cancel()
		err = p.srv.Close()
		p.handlers.Wait()
		p.tr.CloseIdleConnections()
	})
	return err
}

// admit counts the request and decides its fate; ok is false once the
// proxy is closed.
func (p *FaultProxy) admit(r *http.Request) (dec decision, bypass, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isClosed {
		return decision{}, false, false
	}
	p.handlers.Add(1)
	p.stats.Requests++
	if f := p.dec.cfg.Filter; f != nil && !f(r) {
		p.stats.Bypassed++
		return decision{}, true, true
	}
	dec = p.dec.next(r.Method)
	p.stats.Latency += dec.delay
	switch dec.fault {
	case faultError:
		p.stats.Errors++
	case faultErrorAfter:
		p.stats.ErrorsAfter++
	case faultReset:
		p.stats.Resets++
	case faultStall:
		p.stats.Stalls++
	}
	return dec, false, true
}

// ServeHTTP forwards r to the target and applies the fault decided for it.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dec, bypass, ok := p.admit(r)
	if !ok {
		http.Error(w, "s3test: fault proxy closed", http.StatusServiceUnavailable)
		return
	}
	defer p.handlers.Done()
	// The request ends when the client goes away or the proxy closes.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	if bypass {
		p.relay(ctx, w, r, noFault)
		return
	}
	if dec.delay > 0 {
		t := time.NewTimer(dec.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	if dec.fault == faultError {
		// Read the request first, as a server that refuses it after
		// reading does: the client then gets the answer rather than a
		// broken pipe while still sending.
		io.Copy(io.Discard, r.Body)
		writeS3Error(w, r, dec.status)
		return
	}
	if dec.fault == faultErrorAfter {
		resp, err := p.forward(ctx, r)
		if err != nil {
			badGateway(w, r, p.Target, err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		writeS3Error(w, r, dec.status)
		return
	}
	p.relay(ctx, w, r, dec.fault)
}

// relay forwards r and sends the response back, whole (noFault), reset or
// stalled half-way.
func (p *FaultProxy) relay(ctx context.Context, w http.ResponseWriter, r *http.Request, f fault) {
	resp, err := p.forward(ctx, r)
	if err != nil {
		if ctx.Err() == nil {
			badGateway(w, r, p.Target, err)
		}
		return
	}
	defer resp.Body.Close()
	// A body of unknown length (S3 always sends Content-Length) is cut
	// or stalled right after the headers.
	hasBody := resp.ContentLength != 0 && r.Method != http.MethodHead
	if f == faultReset && !hasBody {
		reset(w)
		return
	}
	if f == faultStall && !hasBody {
		<-ctx.Done()
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if f == noFault {
		io.Copy(w, resp.Body)
		return
	}
	if resp.ContentLength > 0 {
		io.CopyN(w, resp.Body, resp.ContentLength/2)
	}
	http.NewResponseController(w).Flush()
	if f == faultReset {
		reset(w)
		return
	}
	<-ctx.Done()
}

// forward sends r to the target with its Host header (which the request's
// signature covers) and its body, and returns the response.
func (p *FaultProxy) forward(ctx context.Context, r *http.Request) (*http.Response, error) {
	start := time.Now()
	defer func() {
		d := time.Since(start)
		p.mu.Lock()
		if p.server == nil {
			p.server = map[string][]time.Duration{}
		}
		op := operation(r)
		p.server[op] = append(p.server[op], d)
		p.mu.Unlock()
	}()
	out := r.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host
	if r.ContentLength == 0 {
		out.Body = nil
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	return p.tr.RoundTrip(out)
}

// hopHeaders are the headers of one hop (RFC 9110, 7.6.1), not passed on;
// Expect is answered by the proxy's own server.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k], vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// reset closes the client's connection with a TCP RST (SO_LINGER 0), after
// what was written so far.
func reset(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		// Cannot happen with net/http's HTTP/1 server; abort the
		// response instead, which closes the connection.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// s3Codes are the S3 error codes of the statuses the proxy injects; the
// AWS SDKs retry both (SlowDown as throttling).
var s3Codes = map[int][2]string{
	http.StatusInternalServerError: {"InternalError", "We encountered an internal error. Please try again."},
	http.StatusServiceUnavailable:  {"SlowDown", "Please reduce your request rate."},
	http.StatusBadGateway:          {"BadGateway", ""},
}

// s3Error is the XML body of an S3 error response.
type s3Error struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource"`
	RequestID string   `xml:"RequestId"`
}

var requestIDs struct {
	sync.Mutex
	n uint64
}

// writeS3Error answers r as S3 does with an error of status: an XML Error
// body with its code, and no body for HEAD.
func writeS3Error(w http.ResponseWriter, r *http.Request, status int, message ...string) {
	requestIDs.Lock()
	requestIDs.n++
	id := "EDDYFAULT" + strconv.FormatUint(requestIDs.n, 16)
	requestIDs.Unlock()
	c := s3Codes[status]
	msg := c[1]
	if len(message) > 0 {
		msg = message[0]
	}
	body, err := xml.Marshal(s3Error{Code: c[0], Message: msg, Resource: r.URL.Path, RequestID: id})
	if err != nil {
		panic(err) // cannot happen: the struct marshals
	}
	body = append([]byte(xml.Header), body...)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("X-Amz-Request-Id", id)
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// badGateway answers a request the target did not answer.
func badGateway(w http.ResponseWriter, r *http.Request, target string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	writeS3Error(w, r, http.StatusBadGateway, fmt.Sprintf("s3test: fault proxy: %s %s at %s: %v", r.Method, r.URL.Path, target, err))
}
