package main

import "fmt"

// counted renders n with the singular or plural noun: "1 finding", "2
// findings".
func counted(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
