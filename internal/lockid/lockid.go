// Package lockid computes the PostgreSQL advisory-lock ids that plain-jobs
// uses for concurrency groups, so Go and Python writers of one keyed group
// in one database serialize on the same lock (plain-jobs takes none for an
// empty key; docs/runtime.md, "Go and Python writers").
package lockid

import (
	"crypto/md5"
	"encoding/binary"
)

// For returns the advisory-lock id of the group (class, key): the first eight
// bytes of md5(class + "::" + key) read as a big-endian signed int64.
// The class-wide lock of a class is For(class, "").
func For(class, key string) int64 {
	sum := md5.Sum([]byte(class + "::" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}
