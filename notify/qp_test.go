package notify_test

import (
	"bytes"
	"io"
	"mime/quotedprintable"
)

func newQP(b []byte) io.Reader { return quotedprintable.NewReader(bytes.NewReader(b)) }
