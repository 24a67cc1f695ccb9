package rewrite

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestDiffLinesIsShortest checks, on random inputs, that the edit script
// rebuilds both sides and is as short as a longest common subsequence
// allows.
func TestDiffLinesIsShortest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		a := randomLines(r)
		b := randomLines(r)
		ops := diffLines(a, b)
		var gotA, gotB []string
		changes := 0
		for _, op := range ops {
			if op.kind != '+' {
				gotA = append(gotA, op.text)
			}
			if op.kind != '-' {
				gotB = append(gotB, op.text)
			}
			if op.kind != ' ' {
				changes++
			}
		}
		if strings.Join(gotA, "") != strings.Join(a, "") || strings.Join(gotB, "") != strings.Join(b, "") {
			t.Fatalf("script does not rebuild the inputs: %q -> %q: %v", a, b, ops)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); changes != want {
			t.Fatalf("%q -> %q: %d changes, shortest is %d", a, b, changes, want)
		}
	}
}

func randomLines(r *rand.Rand) []string {
	lines := make([]string, r.IntN(12))
	for i := range lines {
		lines[i] = string(rune('a'+r.IntN(4))) + "\n"
	}
	return lines
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func TestWriteUnified(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	new := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl"
	var b strings.Builder
	writeUnified(&b, "a/x.go", "b/x.go", old, new)
	want := `--- a/x.go
+++ b/x.go
@@ -1,5 +1,5 @@
 a
-b
+B
 c
 d
 e
@@ -9,3 +9,4 @@
 i
 j
 k
+l
\ No newline at end of file
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
