// Package sweep reads sweep specs (YAML, version 1), validates them with
// line:column errors, and expands them into an ordered plan of server
// configurations ("points") following SGLang's rules for speculative decoding.
//
// docs/spec.md is the user reference for everything in this package.
package sweep
