package csvimport

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxLineBytes bounds one line of a file; a longer line spoils its row.
const MaxLineBytes = 1 << 20

// ErrLineTooLong is the error of a row with a line over MaxLineBytes.
var ErrLineTooLong = fmt.Errorf("a line of the row is longer than %d bytes", MaxLineBytes)

// Record is one CSV record: its row number, its fields, and the byte
// offset in the raw file just after it (where the next record starts).
// Err, when set, is what is wrong with this row alone (it does not decode,
// is malformed CSV, or too long); Fields may then be incomplete.
type Record struct {
	Row    int64
	Fields []string
	End    int64
	Err    error
}

// Reader reads records from raw bytes in one encoding, starting at a record
// boundary. Records whose fields are all blank are skipped and not counted.
type Reader struct {
	feed *lineFeed
	csv  *csv.Reader
	row  int64
}

// NewReader reads src, whose first byte is at offset of the file and
// starts a record numbered firstRow. At offset 0 a UTF-8 byte order mark
// is skipped.
func NewReader(src io.Reader, enc Encoding, offset, firstRow int64) *Reader {
	f := &lineFeed{
		src: bufio.NewReaderSize(src, 64<<10),
		dec: enc.newDecoder(),
		raw: offset,
		bom: offset == 0,
	}
	c := csv.NewReader(f)
	c.FieldsPerRecord = -1
	return &Reader{feed: f, csv: c, row: firstRow - 1}
}

// Read returns the next record, io.EOF after the last, or another error
// when the file cannot be read (the row problems are in Record.Err).
func (r *Reader) Read() (Record, error) {
	for {
		fields, err := r.csv.Read()
		if err != nil && r.feed.err != nil {
			return Record{}, r.feed.err
		}
		if errors.Is(err, io.EOF) {
			return Record{}, io.EOF
		}
		end, bad := r.feed.consume(r.csv.InputOffset())
		rec := Record{Fields: fields, End: end, Err: bad}
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe) && rec.Err == nil:
			rec.Err = fmt.Errorf("malformed CSV: %v", pe.Err)
		case err != nil && !errors.As(err, &pe):
			return Record{}, err
		}
		if rec.Err == nil && blank(fields) {
			continue
		}
		r.row++
		rec.Row = r.row
		return rec, nil
	}
}

func blank(fields []string) bool {
	for _, f := range fields {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

// lineMark records where a decoded line ends in the decoded stream and in
// the raw file, and whether it decoded.
type lineMark struct {
	decEnd int64
	rawEnd int64
	err    error
}

// lineFeed hands the CSV reader the file decoded line by line, keeping the
// marks that map decoded offsets back to raw ones.
type lineFeed struct {
	src     *bufio.Reader
	dec     *decoder
	raw     int64 // raw offset of the next unread byte
	dec0    int64 // decoded bytes produced so far
	bom     bool
	pending []byte
	buf     []byte
	marks   []lineMark
	eof     bool
	err     error // a read error of src, fatal
}

func (f *lineFeed) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		if err := f.next(); err != nil {
			f.err = err
			return 0, err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// next reads, decodes and queues one raw line.
func (f *lineFeed) next() error {
	line, rawLen, tooLong, err := f.readLine()
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read file: %w", err)
	}
	if errors.Is(err, io.EOF) {
		f.eof = true
		if rawLen == 0 {
			return nil
		}
	}
	body := line
	if f.bom {
		f.bom = false
		body = bytes.TrimPrefix(body, []byte("\xEF\xBB\xBF"))
	}
	nl := 0
	if bytes.HasSuffix(body, []byte("\n")) {
		nl = 1
		if bytes.HasSuffix(body, []byte("\r\n")) {
			nl = 2
		}
	}
	var text []byte
	var bad error
	if tooLong {
		text, bad = []byte("\x00"), ErrLineTooLong
	} else {
		text, bad = f.dec.decodeLine(body[:len(body)-nl])
	}
	f.buf = append(append(f.buf[:0], text...), body[len(body)-nl:]...)
	if tooLong && nl == 0 && !f.eof {
		f.buf = append(f.buf, '\n')
	}
	f.pending = f.buf
	f.raw += rawLen
	f.dec0 += int64(len(f.buf))
	f.marks = append(f.marks, lineMark{decEnd: f.dec0, rawEnd: f.raw, err: bad})
	return nil
}

// readLine returns the next raw line with its line feed, or the last
// bytes without one at the end of the file. A line over MaxLineBytes is
// consumed whole and reported tooLong; line then holds only its line feed.
func (f *lineFeed) readLine() (line []byte, rawLen int64, tooLong bool, err error) {
	line, err = f.src.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, int64(len(line)), false, err
	}
	acc := append([]byte(nil), line...)
	rawLen = int64(len(line))
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = f.src.ReadSlice('\n')
		rawLen += int64(len(line))
		if len(acc) <= MaxLineBytes {
			acc = append(acc, line...)
		}
	}
	if rawLen > MaxLineBytes {
		if bytes.HasSuffix(line, []byte("\n")) {
			return []byte("\n"), rawLen, true, err
		}
		return nil, rawLen, true, err
	}
	return acc, rawLen, false, err
}

// consume drops the marks of the lines up to decoded offset decOff (the
// end of a record) and returns the raw offset there and the first decoding
// problem among them.
func (f *lineFeed) consume(decOff int64) (rawEnd int64, bad error) {
	rawEnd = f.raw - int64(len(f.pending))
	i := 0
	for i < len(f.marks) && f.marks[i].decEnd <= decOff {
		if bad == nil {
			bad = f.marks[i].err
		}
		rawEnd = f.marks[i].rawEnd
		i++
	}
	f.marks = f.marks[i:]
	return rawEnd, bad
}
