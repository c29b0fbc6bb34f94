package eddy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds a Chromium or Chrome binary: $EDDY_CHROMIUM, else one on
// PATH ("" if none).
func chromium() string {
	if p := os.Getenv("EDDY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where tests keep files worth looking at afterwards:
// $EDDY_TEST_ARTIFACTS if set, else a temporary directory.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("EDDY_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestAdminPageInBrowser opens the admin page of the running demo job in
// headless Chromium: the job graph shows both stages and their edge with a
// rate, the checkpoint plots draw and gain points as checkpoints complete,
// the savepoint button takes one, and a screenshot is kept. Without Chromium it skips, except under
// CI=true, where .ci/run installs it and its absence is a failure (in
// -short mode, as under the race detector in CI, it does not run).
func TestAdminPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the browser test runs in the full suite")
	}
	path := chromium()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium found and CI=true: .ci/run installs Debian's chromium package (or set EDDY_CHROMIUM)")
		}
		t.Skip("no Chromium found: install Debian's chromium package, or set EDDY_CHROMIUM")
	}
	_, base := opsJob(t)
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1100), chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`#graph g.stage`)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	type view struct {
		Stages   []string `json:"stages"`
		Edges    int      `json:"edges"`
		MaxRate  float64  `json:"maxRate"`
		Points   int      `json:"points"`
		PathLen  int      `json:"pathLen"`
		SizeLen  int      `json:"sizeLen"`
		Updates  int      `json:"updates"`
		Status   string   `json:"status"`
		WMRows   int      `json:"wmRows"`
		Restored string   `json:"restored"`
	}
	const js = `(() => {
		const q = s => document.querySelector(s);
		const stages = [...document.querySelectorAll('#graph g.stage')];
		const d = q('#ckpt-duration path.duration'), s = q('#ckpt-size path.full');
		return {
			stages: stages.map(g => g.dataset.name),
			edges: document.querySelectorAll('#graph path.edge').length,
			maxRate: Math.max(0, ...stages.map(g => +g.dataset.inPerSec)),
			points: +(q('#ckpt-duration').getAttribute('data-points') || 0),
			pathLen: d ? d.getAttribute('d').length : 0,
			sizeLen: s ? s.getAttribute('d').length : 0,
			updates: +(document.body.dataset.updates || 0),
			status: q('#status').textContent,
			wmRows: document.querySelectorAll('#watermarks tbody tr').length,
			restored: q('#restore-text').textContent,
		};
	})()`
	read := func() view {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[view](js))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return v
	}
	first := read()
	eventually(t, 15*time.Second, func() (bool, string) {
		v := read()
		ok := slices.Equal(v.Stages, []string{"gps", "distance"}) && v.Edges == 1 && v.MaxRate > 0 &&
			v.Points > first.Points && v.Updates > first.Updates && v.PathLen > 0 && v.SizeLen > 0 && v.Status == "running" && v.WMRows == 4
		return ok, "page: " + fmtView(v) + " first: " + fmtView(first)
	})
	// The savepoint button takes one and says which checkpoint it is.
	if err := chromedp.Do(ctx, chromedp.Click(`#savepoint`)); err != nil {
		t.Fatalf("clicking the savepoint button: %v", err)
	}
	eventually(t, 15*time.Second, func() (bool, string) {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#savepoint-result').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return regexp.MustCompile(`^savepoint: checkpoint [1-9][0-9]* `).MatchString(s), "savepoint result: " + s
	})
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(artifactDir(t), "admin-page.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the admin page: %s", shot)
}

func fmtView(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
