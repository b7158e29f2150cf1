package csvimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

// FuzzReader checks, for any bytes in any accepted encoding, that the
// reader neither panics nor fails (a bad row is the row's own Err), that
// rows are numbered 1, 2, … and end at strictly increasing offsets inside
// the file, and that reading again from a row's recorded end gives the rows
// of one pass: the chunks of an enrollment job, each read from the offset
// the one before recorded, see the file as one reading does.
//
//	go test ./models/csvimport -run '^$' -fuzz FuzzReader -fuzztime 30s
func FuzzReader(f *testing.F) {
	for i, s := range samples {
		text, _ := csvOf(s.text, 3)
		raw := []byte(text)
		if s.enc != nil {
			if b, err := s.enc.NewEncoder().Bytes(raw); err == nil {
				raw = b
			}
		}
		f.Add(raw, uint8(i))
	}
	f.Add([]byte("\xef\xbb\xbfPrimary Email,Mobile Number\r\na@x.com,\"+1\n415\"\r\n\r\n,,\nb@x.com,\"bad\"quote\n\"open"), uint8(9))
	f.Add([]byte("a,b\n\xff\xfe,c\n\"x\"\"y\",z"), uint8(8))
	f.Fuzz(func(t *testing.T, raw []byte, which uint8) {
		enc, ok := Lookup(Names[int(which)%len(Names)])
		if !ok {
			t.Fatalf("%s is not an encoding", Names[int(which)%len(Names)])
		}
		all, err := fuzzRead(raw, enc, 0, 1)
		if err != nil {
			t.Fatalf("one pass: %v", err)
		}
		last := int64(0)
		for i, rec := range all {
			if rec.Row != int64(i+1) || rec.End <= last || rec.End > int64(len(raw)) {
				t.Fatalf("record %d is row %d ending at %d (the one before at %d, file of %d bytes)", i, rec.Row, rec.End, last, len(raw))
			}
			last = rec.End
		}
		// Resume from a few recorded ends: the first ones and the last.
		for i, rec := range all {
			if i >= 3 && i != len(all)-1 {
				continue
			}
			rest, err := fuzzRead(raw, enc, rec.End, rec.Row+1)
			if err != nil {
				t.Fatalf("from row %d's end %d: %v", rec.Row, rec.End, err)
			}
			if got, want := fuzzShow(rest), fuzzShow(all[i+1:]); got != want {
				t.Fatalf("from row %d's end %d:\n%s\none pass:\n%s", rec.Row, rec.End, got, want)
			}
		}
	})
}

// fuzzRead reads every record of raw from offset on.
func fuzzRead(raw []byte, enc Encoding, offset, row int64) ([]Record, error) {
	r := NewReader(bytes.NewReader(raw[offset:]), enc, offset, row)
	var out []Record
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// fuzzShow prints records for comparison: row, end, fields, and whether the
// row is bad.
func fuzzShow(recs []Record) string {
	var b bytes.Buffer
	for _, r := range recs {
		fmt.Fprintf(&b, "%d@%d %q bad=%v\n", r.Row, r.End, r.Fields, r.Err != nil)
	}
	return b.String()
}
