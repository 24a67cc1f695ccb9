package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// browser drives Debian's headless chromium through chromedriver's
// WebDriver HTTP API (W3C WebDriver), with net/http alone.
type browser struct {
	t       *testing.T
	base    string // the session's URL
	client  *http.Client
	elemKey string
}

// chromiumPaths are where Debian's chromium and chromium-driver put them.
func chromiumPaths(t *testing.T) (chromium, driver string) {
	t.Helper()
	for _, c := range []string{os.Getenv("MIGRATE_UNIQUE_TEST_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if c != "" && isExecutableFile(c) {
			chromium = c
			break
		}
	}
	for _, c := range []string{os.Getenv("MIGRATE_UNIQUE_TEST_CHROMEDRIVER"), "/usr/bin/chromedriver"} {
		if c != "" && isExecutableFile(c) {
			driver = c
			break
		}
	}
	if chromium == "" || driver == "" {
		t.Fatalf("no chromium or chromedriver for the browser tests: install them (Debian: apt-get install chromium chromium-driver; .ci/run does) or set MIGRATE_UNIQUE_TEST_CHROMIUM and MIGRATE_UNIQUE_TEST_CHROMEDRIVER")
	}
	return chromium, driver
}

func isExecutableFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// newBrowser starts chromedriver and a headless chromium session; both
// end with the test.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	chromium, driver := chromiumPaths(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(driver, "--port="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromedriver: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	b := &browser{t: t, client: &http.Client{Timeout: 60 * time.Second}, elemKey: "element-6066-11e4-a52e-4f735466cecf"}
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := b.client.Get(root + "/status")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromedriver did not answer: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"goog:chromeOptions": map[string]any{"binary": chromium, "args": []string{
			"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--window-size=1100,760",
		}},
	}}}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	b.call(http.MethodPost, root+"/session", caps, &created)
	if created.SessionID == "" {
		t.Fatalf("chromedriver gave no session\n%s", logs.String())
	}
	b.base = root + "/session/" + created.SessionID
	t.Cleanup(func() { b.callErr(http.MethodDelete, b.base, nil, nil) })
	return b
}

// callErr makes one WebDriver call and decodes its value into out.
func (b *browser) callErr(method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, env.Value)
	}
	if out != nil {
		return json.Unmarshal(env.Value, out)
	}
	return nil
}

func (b *browser) call(method, url string, body, out any) {
	b.t.Helper()
	if err := b.callErr(method, url, body, out); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) open(url string) {
	b.t.Helper()
	b.call(http.MethodPost, b.base+"/url", map[string]string{"url": url}, nil)
}

func (b *browser) currentURL() string {
	b.t.Helper()
	var u string
	b.call(http.MethodGet, b.base+"/url", nil, &u)
	return u
}

// find returns the element that css selects.
func (b *browser) find(css string) string {
	b.t.Helper()
	var el map[string]string
	b.call(http.MethodPost, b.base+"/element", map[string]string{"using": "css selector", "value": css}, &el)
	return el[b.elemKey]
}

func (b *browser) has(css string) bool {
	b.t.Helper()
	var els []map[string]string
	b.call(http.MethodPost, b.base+"/elements", map[string]string{"using": "css selector", "value": css}, &els)
	return len(els) > 0
}

// text is the rendered text of the element css selects, read in one round
// trip: the page refreshes itself, and an element found in one request may
// be replaced before the next reads it (a stale element reference).
func (b *browser) text(css string) string {
	b.t.Helper()
	var s *string
	b.call(http.MethodPost, b.base+"/execute/sync", map[string]any{
		"script": `const e = document.querySelector(arguments[0]); return e === null ? null : e.innerText`,
		"args":   []any{css},
	}, &s)
	if s == nil {
		b.t.Fatalf("no element %s on the page", css)
	}
	return *s
}

func (b *browser) click(css string) {
	b.t.Helper()
	b.call(http.MethodPost, b.base+"/element/"+b.find(css)+"/click", map[string]any{}, nil)
}

func (b *browser) typeInto(css, text string) {
	b.t.Helper()
	el := b.find(css)
	b.call(http.MethodPost, b.base+"/element/"+el+"/clear", map[string]any{}, nil)
	b.call(http.MethodPost, b.base+"/element/"+el+"/value", map[string]string{"text": text}, nil)
}

// eval runs script (a function body) in the page and decodes its result.
func (b *browser) eval(script string, out any) {
	b.t.Helper()
	b.call(http.MethodPost, b.base+"/execute/sync", map[string]any{"script": script, "args": []any{}}, out)
}

// screenshot returns a PNG of the viewport.
func (b *browser) screenshot() []byte {
	b.t.Helper()
	var s string
	b.call(http.MethodGet, b.base+"/screenshot", nil, &s)
	png, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b.t.Fatal(err)
	}
	return png
}

// alertOpen reports whether a JavaScript dialog is open.
func (b *browser) alertOpen() bool {
	return b.callErr(http.MethodGet, b.base+"/alert/text", nil, nil) == nil
}

// waitFor polls cond until it holds or 15s pass.
func (b *browser) waitFor(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sinceStart is a ready check of a command's output.
func containsLine(s, prefix string) (string, bool) {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix), true
		}
	}
	return "", false
}
