//go:build !linux

package main

import "syscall"

// e2eChildProcAttr has nothing to add where the kernel cannot tie a child's life
// to its parent's: the tests' cleanups kill their processes.
func e2eChildProcAttr() *syscall.SysProcAttr { return nil }
