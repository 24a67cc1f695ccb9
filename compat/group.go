package compat

import "github.com/migrate-unique/migrate-unique/layout"

// GroupName is a group's name wherever one is shown or typed (overrides,
// slots, status): the class alone when the key is empty, else class::key.
func GroupName(class, key string) string { return layout.GroupName(class, key) }
