// Package pgerrcode stands in for github.com/jackc/pgerrcode.
package pgerrcode

// UniqueViolation is SQLSTATE 23505.
const UniqueViolation = "23505"
