package api

// SetMgmtUploadHook sets the hook that runs while a management upload holds
// its slot, and returns the undo.
func SetMgmtUploadHook(f func()) (undo func()) {
	old := mgmtUploadHook.Swap(&f)
	return func() { mgmtUploadHook.Store(old) }
}
