// Package dashboard is the web page of `migrate-unique concurrency serve`:
// the concurrency groups, their limits, slot holders and waiting jobs, and
// the operator's switches (set or clear a limit, pause or resume a class,
// release a slot), served by the binary itself with net/http and
// html/template, its assets embedded.
//
// It reads through the same code as `concurrency status` (package
// groupstatus) and switches through the same calls as the CLI
// (compat.Overrides and compat.Slots, after groupstatus's name checks).
//
// Safety: Listen refuses an address other than loopback without a token;
// every page needs a session, got by logging in with the token; a switch
// needs the session cookie (SameSite=Strict), the form's CSRF token and a
// same-origin Origin header; every response carries a strict
// Content-Security-Policy (no inline script or style); every name is
// escaped by html/template or set as text by the script; the database URL
// is never shown or logged, and errors have its password masked.
package dashboard

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

//go:embed assets
var assets embed.FS

// TokenEnv is the environment variable the token is read from when no
// --token is given.
const TokenEnv = "MIGRATE_UNIQUE_DASHBOARD_TOKEN"

// Options configures a Server.
type Options struct {
	// URL is the database's connection string. It is never shown or
	// logged.
	URL string
	// Layout is the queue's layout: its jobs are counted and listed in its
	// tables, and the runtime tables are in its schema.
	Layout layout.Resolved
	// Token is what an operator logs in with. Empty: New makes a random
	// one (see Server.Token), for a loopback address only.
	Token string
	// ReadOnly hides the switches and refuses them.
	ReadOnly bool
	// Log receives one line per switch used and per error; nil discards.
	Log io.Writer
	// Refresh is how often the groups page refreshes itself; default 5s.
	Refresh time.Duration
	// PageSize is how many groups (or jobs) a page shows; default 100.
	PageSize int
	// QueryTimeout bounds each request's database work; default 15s.
	QueryTimeout time.Duration
}

// Server serves the dashboard. It holds one database connection, opened on
// first use and again after it broke; requests use it one at a time.
type Server struct {
	o       Options
	log     *log.Logger
	session string // the session cookie's value
	csrf    string // the switches' form token
	tmpl    *template.Template
	static  http.Handler
	mux     *http.ServeMux

	mu   sync.Mutex
	conn *pgx.Conn
	// loopbackOnly is set by Serve on a loopback listener: the Host
	// header must then name a loopback host (DNS rebinding).
	loopbackOnly bool
}

// New returns a Server. It does not connect yet.
func New(o Options) (*Server, error) {
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Second
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Token == "" {
		o.Token = randomHex(16)
	}
	s := &Server{o: o, log: log.New(o.Log, "dashboard: ", log.LstdFlags), session: randomHex(32)}
	mac := hmac.New(sha256.New, []byte(s.session))
	mac.Write([]byte("csrf"))
	s.csrf = hex.EncodeToString(mac.Sum(nil))
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard templates: %w", err)
	}
	s.tmpl = t
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s.static = http.StripPrefix("/static/", http.FileServerFS(static))
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.page(s.groupsPage))
	s.mux.HandleFunc("GET /group", s.page(s.groupPage))
	s.mux.HandleFunc("GET /api/groups", s.apiGroups)
	s.mux.HandleFunc("POST /switch", s.page(s.switchPage))
	s.mux.HandleFunc("GET /login", s.login)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("GET /static/{file}", s.staticFile)
	return s, nil
}

// Token is the token an operator logs in with: Options.Token, or the
// random one New made.
func (s *Server) Token() string { return s.o.Token }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on a supported platform
	}
	return hex.EncodeToString(b)
}

// ErrNeedsToken is returned by Listen for an address other than loopback
// without a token.
var ErrNeedsToken = errors.New("an address other than loopback needs a token")

// Listen listens on addr. An address that is not a loopback one (any
// host name but localhost, an unspecified address, a public one) is
// refused unless token is set: the switches would otherwise be one click
// away for anyone on the network.
func Listen(addr, token string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: give host:port, for example 127.0.0.1:8080: %v", addr, err)
	}
	if !isLoopbackHost(host) && token == "" {
		return nil, fmt.Errorf("--listen %s: %w: pass --token or set %s (the operators log in with it), or listen on 127.0.0.1", addr, ErrNeedsToken, TokenEnv)
	}
	return net.Listen("tcp", addr)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve serves on ln until ctx is done, then shuts down (waiting up to 5s
// for requests in flight) and closes the database connection.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		s.loopbackOnly = true
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.o.QueryTimeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log,
		// Requests carry ctx's values (pgurl.WithTracer), not its end:
		// Shutdown lets the requests in flight finish.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		err = nil
	}
	s.Close()
	return err
}

// Close closes the database connection.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close(context.Background())
		s.conn = nil
	}
}

// ServeHTTP checks the Host header and the session, sets the security
// headers and routes the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make a form's Origin "null"
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if s.loopbackOnly {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopbackHost(strings.Trim(host, "[]")) {
			http.Error(w, "this dashboard listens on loopback and answers only to a loopback host name (localhost, 127.0.0.1, [::1])", http.StatusMisdirectedRequest)
			return
		}
	}
	if r.URL.Path != "/login" && !strings.HasPrefix(r.URL.Path, "/static/") && !s.hasSession(r) {
		if strings.HasPrefix(r.URL.Path, "/api/") || r.Method != http.MethodGet {
			writeJSONError(w, http.StatusUnauthorized, "log in first: open /login with the dashboard's token")
			return
		}
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	s.mux.ServeHTTP(w, r)
}

const cookieName = "migrate_unique_dashboard"

func (s *Server) hasSession(r *http.Request) bool {
	c, err := r.Cookie(cookieName)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
}

// login shows the login form, or takes the token (from the form, or from
// the link Serve's caller printed) and sets the session cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	token := r.FormValue("token")
	if token == "" {
		s.render(w, http.StatusOK, "login.html", map[string]any{"Title": "Log in"})
		return
	}
	if r.Method == http.MethodPost && !sameOrigin(r) {
		s.render(w, http.StatusForbidden, "login.html", map[string]any{"Title": "Log in", "Error": "cross-site login refused"})
		return
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.o.Token)) != 1 {
		s.log.Printf("refused a login with a wrong token from %s", r.RemoteAddr)
		s.render(w, http.StatusForbidden, "login.html", map[string]any{"Title": "Log in", "Error": "wrong token"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// sameOrigin reports whether a state-changing request comes from a page of
// this server: its Origin header (sent by every browser with a POST) names
// this host, or, without one, Sec-Fetch-Site says same-origin.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		return o == "http://"+r.Host || o == "https://"+r.Host
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

func (s *Server) staticFile(w http.ResponseWriter, r *http.Request) {
	switch r.PathValue("file") {
	case "app.js", "app.css":
		s.static.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// db runs f on the server's connection, opening it first if needed; a
// connection that broke is dropped and opened again by the next request.
// f is one pgurl.Run: when a pooler refused the pinned search_path at
// connect, each request's reads and switches run in one transaction that
// pins it first.
func (s *Server) db(ctx context.Context, f func(conn pgurl.Handle, slots *compat.Slots) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.IsClosed() {
		s.conn = nil
	}
	if s.conn == nil {
		conn, err := pgurl.Connect(ctx, s.o.URL, "migrate-unique concurrency serve")
		if err != nil {
			return err
		}
		s.conn = conn
	}
	err := pgurl.Run(ctx, s.conn, func(h pgurl.Handle) error {
		slots, err := compat.NewSlots(compat.Pgx(h), layout.Layout{Schema: s.o.Layout.Schema, RequestsTable: layout.PlainJobsRequests}, compat.SlotsOptions{})
		if err != nil {
			return err
		}
		return f(h, slots)
	})
	if err != nil {
		err = groupstatus.Explain(ctx, s.conn, s.o.Layout.Schema, s.o.URL, err)
	}
	return err
}

// pageFunc renders one page: it returns the template, its data, or an
// error shown as the error page.
type pageFunc func(ctx context.Context, r *http.Request) (name string, data map[string]any, err error)

// userError is bad input from the page: shown with status 400.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func (s *Server) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.o.QueryTimeout)
		defer cancel()
		name, data, err := f(ctx, r)
		if err != nil {
			status := http.StatusInternalServerError
			var ue *userError
			var bad *groupstatus.BadNameError
			var he *httpError
			switch {
			case errors.As(err, &he):
				status = he.status
			case errors.As(err, &ue), errors.As(err, &bad), errors.Is(err, compat.ErrSlotArgument):
				status = http.StatusBadRequest
			default:
				s.log.Printf("%s %s: %v", r.Method, r.URL.Path, err)
			}
			s.render(w, status, "error.html", map[string]any{"Title": "Error", "Error": err.Error(), "Status": status})
			return
		}
		s.render(w, http.StatusOK, name, data)
	}
}

// httpError is a refusal with its own status (a switch without the token,
// read-only mode).
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// render executes a template into a buffer first, so that a failure is an
// error page, never half a page.
func (s *Server) render(w http.ResponseWriter, status int, name string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["ReadOnly"] = s.o.ReadOnly
	data["CSRF"] = s.csrf
	data["Schema"] = s.o.Layout.Schema
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Printf("render %s: %v", name, err)
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
