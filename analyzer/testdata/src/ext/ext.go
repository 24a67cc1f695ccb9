// Package ext is a dependency that is no job package.
package ext

// Resource is a cloud resource; its UniqueKey names it.
type Resource struct{ ARN string }

// UniqueKey names the resource.
func (r *Resource) UniqueKey() string { return r.ARN }

// Keyer has a UniqueKey but runs nothing: not a job interface.
type Keyer interface {
	UniqueKey() string
}
