package main

import "syscall"

// e2eChildProcAttr makes the kernel kill a child iam process should the test
// process die without its cleanups (a test timeout, a crash).
func e2eChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
