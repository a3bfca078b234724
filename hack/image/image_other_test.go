//go:build !linux

package main

import "errors"

// runInRoot needs Linux: the image's Envoy is a Linux binary.
func runInRoot(root, path string, args ...string) (string, error) {
	return "", errors.New("running the image's Envoy needs Linux")
}
