package pgurl

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// refusingServer listens on 127.0.0.1 as a PostgreSQL server without TLS
// that checks passwords and takes none: it answers every SSLRequest 'N',
// asks for a password and fails it with 28P01, as a server does for a
// wrong password. It returns the server's address.
func refusingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				be := pgproto3.NewBackend(c, c)
				for {
					msg, err := be.ReceiveStartupMessage()
					if err != nil {
						return
					}
					switch msg.(type) {
					case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
						if _, err := c.Write([]byte("N")); err != nil {
							return
						}
						continue
					case *pgproto3.StartupMessage:
						be.Send(&pgproto3.AuthenticationCleartextPassword{})
						if be.Flush() != nil {
							return
						}
						be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
						if _, err := be.Receive(); err != nil {
							return
						}
						be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "28P01", Message: `password authentication failed for user "app"`})
						_ = be.Flush()
					}
					return
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// keyValue is a key=value connection string to addr with the secret.
func keyValue(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "host=" + host + " port=" + port + " user=app password=" + secret + " dbname=appdb"
}

// freePort returns a 127.0.0.1 address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestConnectErrorsSayTheRealCause: a wrong password prints the server's
// 28P01 alone (no line about TLS, which the server merely does not offer),
// a port nothing listens on says "connection refused" once; neither shows
// the password.
func TestConnectErrorsSayTheRealCause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, url, want string
		code            string
	}{
		{"wrong password", "postgres://app:" + secret + "@" + refusingServer(t) + "/appdb", "password authentication failed", "28P01"},
		{"wrong password, key=value", keyValue(refusingServer(t)), "password authentication failed", "28P01"},
		{"wrong port", "postgres://app:" + secret + "@" + freePort(t) + "/appdb", "connection refused", ""},
	} {
		_, err := Connect(ctx, c.url, "")
		if err == nil {
			t.Fatalf("%s: connected", c.name)
		}
		msg := err.Error()
		var pgErr *pgconn.PgError
		if strings.Count(msg, c.want) != 1 || strings.Contains(msg, "tls") || strings.Contains(msg, "TLS") || leaked(msg) ||
			(c.code != "") != errors.As(err, &pgErr) || (c.code != "" && pgErr.Code != c.code) {
			t.Errorf("%s: %q; want %q once, the error code %q, no TLS line, no password", c.name, msg, c.want, c.code)
		}
	}
}

// poolerServer answers as PgBouncer without search_path in its
// track_extra_parameters: a startup message that carries search_path is
// refused ("unsupported startup parameter: search_path", 08P01); one
// without it is admitted. It records the search_path of every startup
// message, "" for none.
func poolerServer(t *testing.T) (addr string, seen chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	seen = make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				be := pgproto3.NewBackend(c, c)
				for {
					msg, err := be.ReceiveStartupMessage()
					if err != nil {
						return
					}
					switch m := msg.(type) {
					case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
						if _, err := c.Write([]byte("N")); err != nil {
							return
						}
						continue
					case *pgproto3.StartupMessage:
						sp, has := m.Parameters["search_path"]
						seen <- sp
						if has {
							be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "08P01", Message: "unsupported startup parameter: search_path"})
							_ = be.Flush()
							return
						}
						be.Send(&pgproto3.AuthenticationOk{})
						be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
						be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
						_ = be.Flush()
						_, _ = be.Receive() // Terminate
					}
					return
				}
			}()
		}
	}()
	return ln.Addr().String(), seen
}

// TestConnectPinsTheSearchPath: every session starts with SearchPath as a
// startup parameter; a pooler that refuses the parameter is connected to
// again without it.
func TestConnectPinsTheSearchPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, seen := poolerServer(t)
	conn, err := Connect(ctx, "postgres://app@"+addr+"/appdb?sslmode=disable", "")
	if err != nil {
		t.Fatalf("through a pooler that refuses search_path: %v", err)
	}
	_ = conn.Close(ctx)
	if first, second := <-seen, <-seen; first != SearchPath || second != "" {
		t.Errorf("startup search_path: first %q, then %q; want %q, then none", first, second, SearchPath)
	}
}
