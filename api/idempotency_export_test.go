package api

import "github.com/gin-gonic/gin"

// SetIdempotencyAfterAnswerHook sets the hook that runs between a handler's
// answer and its recording under an Idempotency-Key, and returns the undo.
func SetIdempotencyAfterAnswerHook(f func(c *gin.Context)) (undo func()) {
	old := idempotencyAfterAnswerHook.Swap(&f)
	return func() { idempotencyAfterAnswerHook.Store(old) }
}
