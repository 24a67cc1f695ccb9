package rewrite

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Diff writes a unified diff of every changed file, paths relative to the
// module root with a/ and b/ prefixes (apply it with `git apply` or
// `patch -p1`). It writes nothing when nothing changes.
func (r *Result) Diff(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, f := range r.Files {
		name := relPath(r.ModuleDir, f.Path)
		writeUnified(bw, "a/"+name, "b/"+name, string(f.Old), string(f.New))
	}
	return bw.Flush()
}

// contextLines is how many unchanged lines surround each hunk, as in diff -u.
const contextLines = 3

// maxEditDistance bounds the line diff's work; files that differ more are
// shown as one hunk replacing the whole file.
const maxEditDistance = 4000

type lineOp struct {
	kind byte // ' ' kept, '-' deleted, '+' inserted
	text string
}

// writeUnified writes a unified diff of old and new under the given names.
func writeUnified(w io.Writer, oldName, newName, old, new string) {
	if old == new {
		return
	}
	ops := diffLines(splitLines(old), splitLines(new))
	fmt.Fprintf(w, "--- %s\n+++ %s\n", oldName, newName)
	// oldLine[i] and newLine[i] count the lines before ops[i] in each side.
	oldLine := make([]int, len(ops)+1)
	newLine := make([]int, len(ops)+1)
	for i, op := range ops {
		oldLine[i+1], newLine[i+1] = oldLine[i], newLine[i]
		if op.kind != '+' {
			oldLine[i+1]++
		}
		if op.kind != '-' {
			newLine[i+1]++
		}
	}
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-contextLines)
		end := i
		for {
			for end < len(ops) && ops[end].kind != ' ' {
				end++
			}
			next := end
			for next < len(ops) && ops[next].kind == ' ' {
				next++
			}
			if next < len(ops) && next-end <= 2*contextLines {
				end = next
				continue
			}
			end = min(len(ops), end+contextLines)
			break
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n",
			hunkRange(oldLine[start], oldLine[end]-oldLine[start]),
			hunkRange(newLine[start], newLine[end]-newLine[start]))
		for _, op := range ops[start:end] {
			w.Write([]byte{op.kind})
			io.WriteString(w, op.text)
			if !strings.HasSuffix(op.text, "\n") {
				io.WriteString(w, "\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
}

// hunkRange formats "start,count" the way diff -u does: an empty range names
// the line before it.
func hunkRange(before, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", before)
	}
	return fmt.Sprintf("%d,%d", before+1, count)
}

// splitLines splits s into lines, each keeping its "\n".
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// diffLines returns a shortest edit script from a to b (Myers' O(ND)
// algorithm after trimming the common prefix and suffix).
func diffLines(a, b []string) []lineOp {
	var ops []lineOp
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		ops = append(ops, lineOp{' ', a[pre]})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops = append(ops, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, lineOp{' ', l})
	}
	return ops
}

func myers(a, b []string) []lineOp {
	n, m := len(a), len(b)
	if n+m == 0 {
		return nil
	}
	offset := n + m + 1
	v := make([]int, 2*offset+1)
	// trace[d] holds v[-d-1 .. d+1] as it was before step d.
	var trace [][]int
	final := -1
	for d := 0; d <= n+m && d <= maxEditDistance; d++ {
		trace = append(trace, append([]int(nil), v[offset-d-1:offset+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[offset+k-1] < v[offset+k+1]) {
				x = v[offset+k+1]
			} else {
				x = v[offset+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[offset+k] = x
			if x >= n && y >= m {
				final = d
				break
			}
		}
		if final >= 0 {
			break
		}
	}
	if final < 0 { // too different: replace everything
		var ops []lineOp
		for _, l := range a {
			ops = append(ops, lineOp{'-', l})
		}
		for _, l := range b {
			ops = append(ops, lineOp{'+', l})
		}
		return ops
	}
	var rev []lineOp
	x, y := n, m
	for d := final; d > 0; d-- {
		prev := trace[d]
		at := func(k int) int { return prev[k+d+1] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			rev = append(rev, lineOp{' ', a[x-1]})
			x--
			y--
		}
		if x == px {
			rev = append(rev, lineOp{'+', b[y-1]})
			y--
		} else {
			rev = append(rev, lineOp{'-', a[x-1]})
			x--
		}
	}
	for x > 0 && y > 0 {
		rev = append(rev, lineOp{' ', a[x-1]})
		x--
		y--
	}
	ops := make([]lineOp, len(rev))
	for i, op := range rev {
		ops[len(rev)-1-i] = op
	}
	return ops
}
