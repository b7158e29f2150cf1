package csvimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// SampleSize is how much of a file Inspect looks at: the header must end
// within it.
const SampleSize = 1 << 20

// Inspection is what the first bytes of an upload tell.
type Inspection struct {
	// Encoding is the decoder to read the file with (GB2312 resolved).
	Encoding Encoding
	// Header is the header record; DataOffset the byte offset after it.
	Header     []string
	DataOffset int64
}

// Inspect reads the header of a file in enc from sample, its first bytes
// (all of it when atEOF), and checks that the sample's complete lines
// decode and that a data row follows the header. Problems are reported as
// the causes of a refused upload: EMPTY_FILE, INVALID_ENCODING,
// MALFORMED_HEADER.
func Inspect(sample []byte, atEOF bool, enc Encoding) (*Inspection, []Problem) {
	enc = Resolve(enc, sample)
	if !atEOF {
		// Look at complete lines only.
		cut := bytes.LastIndexByte(sample, '\n')
		if cut < 0 {
			return nil, []Problem{{CauseMalformedHeader, fmt.Sprintf("the header does not end within the first %d bytes", SampleSize)}}
		}
		sample = sample[:cut+1]
	}
	if len(bytes.TrimSpace(bytes.TrimPrefix(sample, []byte("\xEF\xBB\xBF")))) == 0 {
		return nil, []Problem{{CauseEmptyFile, "the file holds no header and no rows"}}
	}
	r := NewReader(bytes.NewReader(sample), enc, 0, 0)
	head, err := r.Read()
	if err != nil {
		return nil, []Problem{{CauseEmptyFile, "the file holds no header and no rows"}}
	}
	if errors.Is(head.Err, ErrInvalidEncoding) {
		return nil, []Problem{{CauseInvalidEncoding, fmt.Sprintf("the header is not valid %s text", enc.Name)}}
	}
	if head.Err != nil {
		return nil, []Problem{{CauseMalformedHeader, "the header " + head.Err.Error()}}
	}
	ins := &Inspection{Encoding: enc, Header: head.Fields, DataOffset: head.End}
	rows := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, []Problem{{CauseMalformedHeader, err.Error()}}
		}
		if errors.Is(rec.Err, ErrInvalidEncoding) {
			return nil, []Problem{{CauseInvalidEncoding, fmt.Sprintf("row %d is not valid %s text", rec.Row, enc.Name)}}
		}
		rows++
	}
	if rows == 0 && atEOF {
		return nil, []Problem{{CauseEmptyFile, "the file holds a header but no rows"}}
	}
	return ins, nil
}
