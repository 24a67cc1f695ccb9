package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// dashboardQueue is a migrated plain-jobs queue with groups under, at and
// over their limits, a live and an expired slot, a rescheduled job, a
// paused class and a group whose key is HTML.
type dashboardQueue struct {
	db    string
	pool  *pgxpool.Pool
	slots *compat.Slots
}

const hostileKey = `<script>alert("key")</script><img src=x onerror=alert(1)>`

func newDashboardQueue(t *testing.T) *dashboardQueue {
	t.Helper()
	db := withPassword(t, plainJobsDB(t))
	if code, out, errOut := runCLI(t, "up", "--database", db); code != 0 {
		t.Fatalf("up: %d\n%s%s", code, out, errOut)
	}
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// The seed's jobs are not this test's: an empty queue first.
	if _, err := pool.Exec(ctx, `TRUNCATE plainjobs_jobrequest, plainjobs_jobprocess`); err != nil {
		t.Fatal(err)
	}
	c, err := compat.NewClient(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	slots, err := compat.NewSlots(compat.Pgx(pool), layout.PlainJobs(), compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := &dashboardQueue{db: db, pool: pool, slots: slots}
	enqueue := func(class, key string, limit, n int) {
		t.Helper()
		for range n {
			res, err := c.Enqueue(ctx, compat.Job{Class: class, Value: compat.Limit(key, limit)})
			if err != nil || !res.Inserted() {
				t.Fatalf("enqueue %s::%s: %+v %v", class, key, res, err)
			}
		}
	}
	acquire := func(group string, limit, n int) {
		t.Helper()
		for i := range n {
			if _, ok, err := slots.Acquire(ctx, group, limit, fmt.Sprintf("job-%s-%d", group, i), "host-a:4"+strconv.Itoa(i), time.Hour); err != nil || !ok {
				t.Fatalf("acquire %s: %v %v", group, ok, err)
			}
		}
	}
	enqueue("dash.Mail", "under", 4, 1)
	acquire("dash.Mail::under", 4, 1)
	enqueue("dash.Mail", "at", 9, 3)
	acquire("dash.Mail::at", 2, 2)
	enqueue("dash.Mail", "over", 9, 4)
	acquire("dash.Mail::over", 3, 3)
	if err := slots.Overrides().SetLimit(ctx, "dash.Mail::over", 1, "smtp quota <b>"); err != nil {
		t.Fatal(err)
	}
	enqueue("dash.Mail", hostileKey, 5, 1)
	acquire("dash.Mail::"+hostileKey, 5, 1)
	acquire("dash.Report::exp", 2, 2)
	if _, err := pool.Exec(ctx, `UPDATE concurrency_slots SET expires_at = now() - interval '5 minutes' WHERE group_name = 'dash.Report::exp' AND slot = 1`); err != nil {
		t.Fatal(err)
	}
	enqueue("dash.Export", "e1", 9, 2)
	acquire("dash.Export::e1", 3, 1)
	if _, err := slots.Overrides().PauseClass(ctx, "dash.Export", "incident 7"); err != nil {
		t.Fatal(err)
	}
	// A job of the group over its limit was rescheduled 4 times.
	if _, err := pool.Exec(ctx, `INSERT INTO concurrency_reschedules (job_id, group_name, reschedules, first_at, last_at)
SELECT uuid::text, 'dash.Mail::over', 4, now() - interval '10 minutes', now() FROM plainjobs_jobrequest WHERE concurrency_key = 'over' ORDER BY id LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	return q
}

// startServe runs 'concurrency serve' in this process until the test
// ends and returns its address and login link.
func startServe(t *testing.T, args ...string) (base, login string, logs *syncBuffer) {
	t.Helper()
	return startServeContext(t, context.Background(), args...)
}

// startServeContext is startServe under parent (a context that carries a
// statement recorder: pgurl.WithTracer).
func startServeContext(t *testing.T, parent context.Context, args ...string) (base, login string, logs *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(parent)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{stdout: out, stderr: errOut}, append([]string{"concurrency", "serve", "--listen", "127.0.0.1:0"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if l, ok := containsLine(out.String(), "log in: "); ok {
			login = l
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before serving: %s%s", code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s%s", out.String(), errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	u, err := url.Parse(login)
	if err != nil {
		t.Fatal(err)
	}
	return u.Scheme + "://" + u.Host, login, errOut
}

// TestDashboardInABrowser drives the dashboard in headless chromium: what
// the groups page and a group's page show against 'concurrency status
// --json', the refresh without reload, every switch checked in the
// database, a hostile key shown as text, and the screenshots in docs/.
func TestDashboardInABrowser(t *testing.T) {
	q := newDashboardQueue(t)
	ctx := t.Context()
	base, login, logs := startServe(t, "--database", q.db, "--refresh", "1s")
	b := newBrowser(t)

	b.open(login)
	if u := b.currentURL(); u != base+"/" {
		t.Fatalf("after the login link the browser is at %s, want %s/", u, base)
	}
	var st statusJSON
	mustJSON(t, 0, &st, "concurrency", "status", "--json", "--database", q.db)
	type cells []string
	var rows []cells
	readRows := func() {
		rows = nil
		b.eval(`return Array.from(document.querySelectorAll("#groups tbody tr")).map(tr => Array.from(tr.cells).map(td => td.textContent))`, &rows)
	}
	readRows()
	if len(rows) != len(st.Groups) {
		t.Fatalf("the page shows %d groups, status --json %d:\n%v", len(rows), len(st.Groups), rows)
	}
	byGroup := map[string]cells{}
	var order []string
	for _, r := range rows {
		byGroup[r[0]] = r
		order = append(order, r[0])
	}
	num := func(n *int64) string {
		if n == nil {
			return "?"
		}
		return strconv.FormatInt(*n, 10)
	}
	for _, g := range st.Groups {
		r, ok := byGroup[g.Group]
		if !ok {
			t.Errorf("group %q of status --json is not on the page", g.Group)
			continue
		}
		limit := "-"
		if g.Limit != nil {
			limit = strconv.Itoa(*g.Limit)
		}
		source := g.LimitSource
		switch g.LimitSource {
		case "override":
			source += ": " + g.OverrideReason
		case "class_pause":
			source += ": " + g.PauseReason
		}
		source = strings.TrimSuffix(source, ": ")
		expired := 0
		for _, sl := range g.Slots {
			if sl.Expired {
				expired++
			}
		}
		want := cells{g.Group, limit, source, num(g.Queued), num(g.Running), strconv.FormatInt(*g.Queued+*g.Running, 10),
			strconv.Itoa(g.SlotsHeld), strconv.Itoa(expired), strconv.Itoa(g.SlotsOverLimit), strconv.Itoa(len(g.RescheduledJobs))}
		if got := r[:len(want)]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("group %q: the page shows\n%q\nstatus --json says\n%q", g.Group, got, want)
		}
	}
	// Sorted by pressure: the paused class's groups with jobs (blocked)
	// first (the one with a holder over its limit 0 first), the group over
	// its limit (4 queued jobs on 1 slot) next; the group under its limit
	// has 1 job on 4 slots.
	if len(order) < 4 || order[0] != "dash.Export::e1" || order[1] != "dash.Export" || order[2] != "dash.Mail::over" {
		t.Errorf("order by pressure: %q", order)
	}
	if byGroup["dash.Export::e1"][10] != "blocked" || byGroup["dash.Mail::over"][10] != "400%" || byGroup["dash.Mail::at"][10] != "150%" || byGroup["dash.Mail::under"][10] != "25%" {
		t.Errorf("pressure column: %q %q %q %q", byGroup["dash.Export::e1"], byGroup["dash.Mail::over"], byGroup["dash.Mail::at"], byGroup["dash.Mail::under"])
	}
	if !strings.Contains(b.text(".paused"), "Class dash.Export is PAUSED since") {
		t.Errorf("paused class banner: %q", b.text(".paused"))
	}

	// The hostile key is text: no dialog, no script or image from it, and
	// the link's text is the key itself.
	var scripts, imgs int
	b.eval(`return document.querySelectorAll("script").length`, &scripts)
	b.eval(`return document.querySelectorAll("img").length`, &imgs)
	if scripts != 1 || imgs != 0 || b.alertOpen() {
		t.Errorf("the hostile key became markup: %d scripts, %d images, alert %v", scripts, imgs, b.alertOpen())
	}
	if _, ok := byGroup["dash.Mail::"+hostileKey]; !ok {
		t.Errorf("the hostile key's group is not shown as text; rows %q", order)
	}

	// The filter: one class, and a key prefix.
	b.open(base + "/?class=dash.Mail&prefix=o")
	readRows()
	if len(rows) != 1 || rows[0][0] != "dash.Mail::over" {
		t.Errorf("filter class dash.Mail prefix o: %q", rows)
	}

	// The page refreshes itself without reloading.
	b.open(base + "/")
	b.eval(`window.notReloaded = true; return null`, nil)
	if _, ok, err := q.slots.Acquire(ctx, "dash.Mail::under", 4, "job-late", "host-b:1", time.Hour); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	b.waitFor("the refresh to show the new holder", func() bool {
		return b.text(`#groups tr[data-group="dash.Mail::under"] td.held`) == "2"
	})
	var still bool
	b.eval(`return window.notReloaded === true`, &still)
	if !still {
		t.Error("the page reloaded to refresh")
	}
	// ... and not while the operator types in the filter.
	b.click("#filter-prefix")
	b.waitFor("the refresh to pause while typing", func() bool {
		return b.text("#refresh-state") == "auto-refresh paused while you type"
	})
	screenshot(t, b, base+"/", "dashboard-groups.png")

	// A group's page: slots, holders, the override's reason, queued jobs
	// with their reschedule counts.
	openGroup(b, base, "dash.Mail::over")
	var slotRows []cells
	b.eval(`return Array.from(document.querySelectorAll("#slots tbody tr")).map(tr => Array.from(tr.cells).slice(0, 5).map(td => td.textContent))`, &slotRows)
	tokens := map[string][]string{}
	for _, g := range st.Groups {
		for _, sl := range g.Slots {
			tokens[g.Group] = append(tokens[g.Group], strconv.FormatInt(sl.Token, 10))
		}
	}
	if fmt.Sprint(slotRows) != fmt.Sprint([]cells{
		{"0", "held", "job-dash.Mail::over-0", "host-a:40", tokens["dash.Mail::over"][0]},
		{"1", "held, over limit", "job-dash.Mail::over-1", "host-a:41", tokens["dash.Mail::over"][1]},
		{"2", "held, over limit", "job-dash.Mail::over-2", "host-a:42", tokens["dash.Mail::over"][2]},
	}) {
		t.Errorf("slots of dash.Mail::over: %q", slotRows)
	}
	if got := b.text("#override-reason"); got != "smtp quota <b>" {
		t.Errorf("override reason %q", got)
	}
	if got := b.text("#override"); !strings.Contains(got, "who set it is not recorded") {
		t.Errorf("override: %q", got)
	}
	var queued []cells
	b.eval(`return Array.from(document.querySelectorAll("#queued-jobs tbody tr")).map(tr => Array.from(tr.cells).map(td => td.textContent))`, &queued)
	if len(queued) != 4 || queued[0][4] != "4" || queued[1][4] != "0" {
		t.Errorf("queued jobs of dash.Mail::over (oldest first, the first rescheduled 4 times): %q", queued)
	}
	screenshot(t, b, "", "dashboard-group.png")

	// The hostile key's own page.
	openGroup(b, base, "dash.Mail::"+hostileKey)
	if got := b.text("#key"); got != hostileKey || b.alertOpen() {
		t.Errorf("the hostile key's page shows key %q (alert %v)", got, b.alertOpen())
	}

	limitOf := func(group string) (limit int, reason string, ok bool) {
		err := q.pool.QueryRow(ctx, `SELECT concurrency_limit, reason FROM concurrency_limits WHERE group_name = $1`, group).Scan(&limit, &reason)
		return limit, reason, err == nil
	}
	confirm := func(wantText string) string {
		t.Helper()
		expectPage(b, "#confirm-text")
		if got := b.text("#confirm-text"); !strings.Contains(got, wantText) {
			t.Errorf("the confirmation says %q, want %q in it", got, wantText)
		}
		b.click("#confirm")
		expectPage(b, "#done-text")
		return b.text("#done-text")
	}
	// Set the maintenance switch, then clear it.
	openGroup(b, base, "dash.Mail::at")
	b.typeInto("#set-limit", "0")
	b.typeInto("#set-reason", "maintenance 12")
	b.click("#set")
	expectPage(b, "#confirm-command")
	if got := b.text("#confirm-command"); got != "migrate-unique concurrency set dash.Mail::at --limit 0 --reason 'maintenance 12'" {
		t.Errorf("confirmation command %q", got)
	}
	if got := confirm("Limit 0 is the maintenance switch: no job of this group is admitted or started"); got != "group dash.Mail::at: limit 0 (override); 2 holder(s) over the new limit finish their jobs" {
		t.Errorf("set: %q", got)
	}
	if l, r, ok := limitOf("dash.Mail::at"); !ok || l != 0 || r != "maintenance 12" {
		t.Errorf("after set: %d %q %v", l, r, ok)
	}
	b.click("#back")
	expectPage(b, "#clear")
	b.click("#clear")
	if got := confirm("Remove the operator override of group dash.Mail::at"); got != "cleared the override of group dash.Mail::at; the code's limit applies" {
		t.Errorf("clear: %q", got)
	}
	if _, _, ok := limitOf("dash.Mail::at"); ok {
		t.Error("the override is still there after clear")
	}
	// Pause a class, then resume it.
	b.click("#back")
	expectPage(b, "#pause-reason-input")
	b.typeInto("#pause-reason-input", "deploy")
	b.click("#pause")
	if got := confirm("Pause class dash.Mail: no job of the class is admitted or started"); got != "class dash.Mail paused: no job of the class is admitted or started" {
		t.Errorf("pause: %q", got)
	}
	if l, r, ok := limitOf("dash.Mail::"); !ok || l != 0 || r != "deploy" {
		t.Errorf("after pause: %d %q %v", l, r, ok)
	}
	b.click("#back")
	expectPage(b, "#resume")
	b.click("#resume")
	if got := confirm("Resume class dash.Mail"); got != "class dash.Mail resumed: its groups are admitted and started again under their own limits" {
		t.Errorf("resume: %q", got)
	}
	if _, _, ok := limitOf("dash.Mail::"); ok {
		t.Error("the class is still paused after resume")
	}
	// Release the expired slot.
	openGroup(b, base, "dash.Report::exp")
	if got := b.text(`#slots tr[data-slot="1"] td.state`); got != "expired" {
		t.Errorf("slot 1 of dash.Report::exp shows %q, want expired", got)
	}
	b.click(`#slots tr[data-slot="1"] button.release`)
	tok := tokens["dash.Report::exp"][1]
	if got := confirm("whose lease by job job-dash.Report::exp-1 on worker host-a:41 (token " + tok + ") has expired"); got != "freed slot 1 of group dash.Report::exp: job job-dash.Report::exp-1 on worker host-a:41, token "+tok+", no longer valid" {
		t.Errorf("release: %q", got)
	}
	var left int
	if err := q.pool.QueryRow(ctx, `SELECT count(*) FROM concurrency_slots WHERE group_name = 'dash.Report::exp' AND slot = 1`).Scan(&left); err != nil || left != 0 {
		t.Errorf("the released slot row: %d %v", left, err)
	}

	// Nothing shows the password or the URL, in the pages or the log.
	var source string
	b.open(base + "/")
	b.eval(`return document.documentElement.outerHTML`, &source)
	for _, leak := range []string{"Sup3rS3cretPw", "postgres://", q.db} {
		if strings.Contains(source, leak) || strings.Contains(logs.String(), leak) {
			t.Errorf("%q is on the page or in the log", leak)
		}
	}
}

// openGroup opens a group's page and fails with what the page says when
// it is not the group's page.
func openGroup(b *browser, base, group string) {
	b.t.Helper()
	b.open(base + "/group?" + url.Values{"name": {group}}.Encode())
	expectPage(b, "#group-name")
}

// expectPage waits for the page to have an element css (a click's
// navigation may still be under way) and fails with what the page says
// when it does not come.
func expectPage(b *browser, css string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.has(css) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !b.has(css) {
		var text string
		b.eval(`return document.body.innerText`, &text)
		b.t.Fatalf("the page has no %s; it says:\n%s", css, text)
	}
}

// screenshot writes the page's PNG to docs/ when it is missing or
// MIGRATE_UNIQUE_WRITE_SCREENSHOTS=1, so that the committed images change
// only when asked; it always checks the PNG is one and small.
func screenshot(t *testing.T, b *browser, url, name string) {
	t.Helper()
	if url != "" {
		b.open(url)
	}
	img := b.screenshot()
	if _, err := png.Decode(bytes.NewReader(img)); err != nil || len(img) > 300<<10 {
		t.Fatalf("screenshot %s: %d bytes, %v", name, len(img), err)
	}
	path := filepath.Join("..", "..", "docs", name)
	if _, err := os.Stat(path); err == nil && os.Getenv("MIGRATE_UNIQUE_WRITE_SCREENSHOTS") != "1" {
		return
	}
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(img))
}

// TestDashboardRefusesSwitchesWithoutTheToken posts switches the way
// another site or a script without the session would, and checks that
// each is refused and changes nothing; and that --read-only refuses them
// with the session.
func TestDashboardRefusesSwitchesWithoutTheToken(t *testing.T) {
	q := newDashboardQueue(t)
	ctx := t.Context()
	base, login, _ := startServe(t, "--database", q.db)
	form := url.Values{"step": {"apply"}, "action": {"set"}, "group": {"dash.Mail::at"}, "limit": {"0"}}
	post := func(c *http.Client, origin string, f url.Values) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/switch", strings.NewReader(f.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		return resp.StatusCode, body.String()
	}
	unchanged := func(what string) {
		t.Helper()
		var n int
		if err := q.pool.QueryRow(ctx, `SELECT count(*) FROM concurrency_limits WHERE group_name = 'dash.Mail::at'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s changed the database: %d %v", what, n, err)
		}
	}
	// No session (no token): refused.
	if code, body := post(http.DefaultClient, base, form); code != http.StatusUnauthorized || !strings.Contains(body, "log in first") {
		t.Errorf("a switch without the token: %d %s", code, body)
	}
	unchanged("a switch without the token")
	// A wrong token does not log in.
	if resp, err := http.Get(base + "/login?token=wrong"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("login with a wrong token: %v %v", resp, err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(login)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %v %v", resp, err)
	}
	resp.Body.Close()
	u, _ := url.Parse(base)
	var cookie *http.Cookie
	for _, ck := range jar.Cookies(u) {
		cookie = ck
	}
	if cookie == nil {
		t.Fatal("no session cookie after login")
	}
	// With the session but without the form's CSRF token: refused.
	if code, body := post(c, base, form); code != http.StatusForbidden || !strings.Contains(body, "form token is missing or stale") {
		t.Errorf("a switch without the CSRF token: %d %s", code, body)
	}
	unchanged("a switch without the CSRF token")
	// With the CSRF token but from another site: refused.
	page, err := c.Get(base + "/group?name=dash.Mail::at")
	if err != nil {
		t.Fatal(err)
	}
	var html bytes.Buffer
	_, _ = html.ReadFrom(page.Body)
	page.Body.Close()
	_, after, ok := strings.Cut(html.String(), `name="csrf" value="`)
	csrf, _, _ := strings.Cut(after, `"`)
	if !ok || len(csrf) != 64 {
		t.Fatalf("no CSRF token on the group's page")
	}
	form.Set("csrf", csrf)
	if code, body := post(c, "http://evil.example", form); code != http.StatusForbidden || !strings.Contains(body, "Origin check") {
		t.Errorf("a cross-site switch: %d %s", code, body)
	}
	if code, body := post(c, "", form); code != http.StatusForbidden {
		t.Errorf("a switch without Origin: %d %s", code, body)
	}
	unchanged("a cross-site switch")
	// The same request from the page's origin works.
	if code, body := post(c, base, form); code != http.StatusOK || !strings.Contains(body, "limit 0 (override)") {
		t.Errorf("the switch from the page: %d %s", code, body)
	}
	// A Host header that is not loopback is refused (DNS rebinding).
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	req.Host = "attacker.example:80"
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host name: %v %v", resp, err)
	}

	// --read-only: no switch on the page, and a posted one is refused.
	roBase, roLogin, _ := startServe(t, "--database", q.db, "--read-only")
	jar2, _ := cookiejar.New(nil)
	ro := &http.Client{Jar: jar2}
	resp, err = ro.Get(roLogin)
	if err != nil {
		t.Fatal(err)
	}
	html.Reset()
	_, _ = html.ReadFrom(resp.Body)
	resp.Body.Close()
	resp, err = ro.Get(roBase + "/group?name=dash.Mail::over")
	if err != nil {
		t.Fatal(err)
	}
	html.Reset()
	_, _ = html.ReadFrom(resp.Body)
	resp.Body.Close()
	if strings.Contains(html.String(), `action="/switch"`) || !strings.Contains(html.String(), "read-only") {
		t.Errorf("the read-only group page offers switches:\n%s", html.String())
	}
	_, after, _ = strings.Cut(html.String(), `name="csrf" value="`)
	form = url.Values{"step": {"apply"}, "action": {"clear"}, "group": {"dash.Mail::over"}, "csrf": {csrf}}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, roBase+"/switch", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", roBase)
	if resp, err := ro.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a switch on a read-only dashboard: %v %v", resp, err)
	}
	var n int
	if err := q.pool.QueryRow(ctx, `SELECT count(*) FROM concurrency_limits WHERE group_name = 'dash.Mail::over'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the read-only dashboard changed the override: %d %v", n, err)
	}
}

// TestDashboardListenNeedsATokenOffLoopback checks that serve refuses an
// address other than loopback without a token, and shows a database error
// as an error page.
func TestDashboardListenNeedsATokenOffLoopback(t *testing.T) {
	t.Setenv("MIGRATE_UNIQUE_DASHBOARD_TOKEN", "")
	db := testdb.New(t)
	code, _, errOut := runCLI(t, "concurrency", "serve", "--database", db, "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "an address other than loopback needs a token: pass --token or set MIGRATE_UNIQUE_DASHBOARD_TOKEN") {
		t.Errorf("serve on 0.0.0.0 without a token: %d %q", code, errOut)
	}
	// A database without the runtime tables: the page says so.
	base, login, _ := startServe(t, "--database", db)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body.String(), "the runtime tables (concurrency_limits, concurrency_slots, concurrency_reschedules) are missing") {
		t.Errorf("the groups page on a database without the runtime tables: %d\n%s", resp.StatusCode, body.String())
	}
	resp, err = c.Get(base + "/api/groups")
	if err != nil {
		t.Fatal(err)
	}
	body.Reset()
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body.String(), `"error":"the runtime tables`) {
		t.Errorf("/api/groups on a database without the runtime tables: %d %s", resp.StatusCode, body.String())
	}
}
