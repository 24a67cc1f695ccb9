package load

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Causes reduces the load errors of a package graph to their root causes,
// each once, so that a user sees what to fix rather than every error that
// follows from it:
//
//   - an import that fails because a package failed (`could not import X`,
//     `no metadata for X`) is a follow-on of that package's own error, and
//     is left out whenever that error is listed;
//   - a go command error about a module or a package (a download that
//     failed, a missing go.sum entry, a package no module provides) is
//     listed once per module or package it names, with how many packages
//     met it, wherever they are;
//   - the errors of a package that does not compile (parse and type errors)
//     are listed once, under the package's name, however many test
//     variants and tag sets saw them.
//
// Positions under dir are shown relative to it. The result is in the order
// of the graph (dependencies first).
func Causes(pkgs []*packages.Package, dir string) []string {
	type cause struct {
		text     string
		packages map[string]bool
	}
	var order []string
	causes := map[string]*cause{}
	add := func(key, text, pkg string) {
		c := causes[key]
		if c == nil {
			c = &cause{text: text, packages: map[string]bool{}}
			causes[key] = c
			order = append(order, key)
		}
		c.packages[pkg] = true
	}
	var followOns []string
	seenFollowOn := map[string]bool{}
	// importers maps a package to the packages importing it: a package that
	// could not be found or downloaded is met by each of them.
	importers := map[*packages.Package][]string{}
	packages.Visit(pkgs, nil, func(pkg *packages.Package) {
		for _, dep := range pkg.Imports {
			importers[dep] = append(importers[dep], pkg.PkgPath)
		}
	})
	packages.Visit(pkgs, nil, func(pkg *packages.Package) {
		name := pkg.PkgPath
		if name == "" {
			name = pkg.ID
		}
		// A package that does not compile has its errors twice: from the
		// type check, and as the compiler's output (a "# path" block) from
		// the go command building its export data. The type check's are
		// kept.
		// A type check that only met follow-ons (cgo that did not run:
		// `could not import C`) leaves the compiler's block as the cause.
		typeErrors := false
		for _, e := range pkg.Errors {
			typeErrors = typeErrors || (e.Kind == packages.TypeError || e.Kind == packages.ParseError) && !isFollowOn(e.Msg)
		}
		for _, e := range pkg.Errors {
			if typeErrors && e.Kind == packages.ListError && strings.HasPrefix(e.Msg, "# ") {
				continue
			}
			msg := e.Msg
			if e.Kind == packages.ListError && strings.HasPrefix(msg, "# ") {
				msg = compilerErrors(msg)
			}
			pos := shortPos(e.Pos, dir)
			text := msg
			if pos != "" && pos != "-" {
				text = pos + ": " + msg
			}
			switch {
			case isFollowOn(msg):
				if !seenFollowOn[text] {
					seenFollowOn[text] = true
					followOns = append(followOns, text)
				}
			case e.Kind == packages.ListError:
				// The same failed download or missing module shows up in
				// every package that imports it, each at its own import.
				subject := listErrorSubject(msg)
				if subject == msg {
					// "module lookup disabled by GOPROXY=off" names no
					// module: the import at its position does.
					if path := importAt(e.Pos, dir); path != "" {
						subject = "package " + path
						text += " (import " + strconv.Quote(path) + ")"
					}
				}
				if len(pkg.GoFiles) == 0 && len(importers[pkg]) > 0 {
					for _, imp := range importers[pkg] {
						add("list: "+subject, text, imp)
					}
					continue
				}
				add("list: "+subject, text, name)
			default:
				add("pkg: "+name+": "+text, text, name)
			}
		}
	})
	if len(order) == 0 {
		return followOns
	}
	out := make([]string, 0, len(order))
	for _, key := range order {
		c := causes[key]
		if n := len(c.packages); strings.HasPrefix(key, "list: ") && n > 1 {
			names := make([]string, 0, n)
			for p := range c.packages {
				names = append(names, p)
			}
			sort.Strings(names)
			more := ""
			if n > 3 {
				names, more = names[:3], fmt.Sprintf(" and %d more", n-3)
			}
			out = append(out, fmt.Sprintf("%s (met by %d packages: %s%s)", c.text, n, strings.Join(names, ", "), more))
			continue
		}
		out = append(out, c.text)
	}
	return out
}

// compilerErrors keeps, of the go command's copy of a failed build ("#
// path", then the compiler's or cgo's output), the error lines, without the
// quoted source and the carets under it: "p/p.go:3:11: fatal error:
// olm/olm.h: No such file or directory", as go vet shows it.
func compilerErrors(block string) string {
	var keep []string
	for _, line := range strings.Split(block, "\n")[1:] {
		if errorLine.MatchString(line) {
			keep = append(keep, strings.TrimSpace(line))
		}
	}
	if len(keep) == 0 {
		return strings.TrimSpace(strings.TrimPrefix(block, "#"))
	}
	return strings.Join(keep, "; ")
}

// errorLine matches a compiler error line, "file:line:col: message" or
// "file:line: message".
var errorLine = regexp.MustCompile(`^[^\s:][^:]*:\d+(:\d+)?: `)

// isFollowOn reports whether a load error only says that an import failed,
// which the imported package's own error explains.
func isFollowOn(msg string) bool {
	return strings.Contains(msg, "could not import ") || strings.Contains(msg, "no metadata for ") ||
		strings.HasPrefix(msg, "missing package: ") || strings.Contains(msg, "invalid package name: \"\"")
}

// moduleVersion finds "path@version" in a go command error: the module a
// download or a lookup failed for.
var moduleVersion = regexp.MustCompile(`\b([a-zA-Z0-9][-a-zA-Z0-9_.~/]*\.[a-zA-Z0-9_.~/-]+)@(v[0-9][-a-zA-Z0-9_.+]*)`)

// providingPackage finds the package a "no required module provides" or a
// "missing go.sum entry" error is about.
var providingPackage = regexp.MustCompile(`(?:providing|provides) package ([^\s;:()]+)`)

// listErrorSubject names what a go command error is about, so that the
// same failure met by many importing packages is one cause: the module and
// version it names, else the package, else the message itself.
func listErrorSubject(msg string) string {
	if m := moduleVersion.FindStringSubmatch(msg); m != nil {
		return m[1] + "@" + m[2]
	}
	if m := providingPackage.FindStringSubmatch(msg); m != nil {
		return "package " + m[1]
	}
	return msg
}

// shortPos shows a position relative to dir when it is a file under it.
func shortPos(pos, dir string) string {
	if dir == "" || !filepath.IsAbs(pos) {
		return pos
	}
	return relPath(dir, pos)
}

// importAt returns the import path quoted on the line of a position
// "file:line:col" (a relative file is looked for as it is, then under dir),
// or "" when there is none.
func importAt(pos, dir string) string {
	parts := strings.Split(pos, ":")
	if len(parts) < 3 {
		return ""
	}
	file := strings.Join(parts[:len(parts)-2], ":")
	line, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil || line < 1 {
		return ""
	}
	f, err := os.Open(file)
	if err != nil && !filepath.IsAbs(file) && dir != "" {
		f, err = os.Open(filepath.Join(dir, file))
	}
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if n < line {
			continue
		}
		text := sc.Text()
		i := strings.IndexAny(text, "\"`")
		if i < 0 {
			return ""
		}
		path, err := strconv.QuotedPrefix(text[i:])
		if err != nil {
			return ""
		}
		p, _ := strconv.Unquote(path)
		return p
	}
	return ""
}
