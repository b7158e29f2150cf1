package safezip

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"iam/models/safezip/ziptest"
)

type file struct {
	name   string
	data   []byte
	method uint16
}

func build(t testing.TB, files ...file) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, f := range files {
		fw, err := w.CreateHeader(&zip.FileHeader{Name: f.name, Method: f.method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func open(t *testing.T, b []byte, lim Limits) (*Archive, error) {
	t.Helper()
	return Open(bytes.NewReader(b), int64(len(b)), lim)
}

// The hostile set: each entry is flagged, never read; the archive opens.
func TestOpen_FlagsHostileEntries(t *testing.T) {
	inner := build(t, file{name: "a.cer", data: []byte("x")})
	zeros := bytes.Repeat([]byte{0}, 200<<10)
	b := build(t,
		file{name: "dir/", data: nil},
		file{name: "__MACOSX/._ok.cer", data: []byte("meta")},
		file{name: "ok.cer", data: []byte("cert")},
		file{name: "../../etc/evil.cer", data: []byte("x")},
		file{name: "/abs.cer", data: []byte("x")},
		file{name: "C:\\win.cer", data: []byte("x")},
		file{name: "sub\\..\\..\\up.cer", data: []byte("x")},
		file{name: "nested.zip", data: inner},
		file{name: "disguised.cer", data: inner},
		file{name: "bomb.cer", data: zeros, method: zip.Deflate},
		file{name: "big.cer", data: bytes.Repeat([]byte("ab"), 150<<10), method: zip.Store},
		file{name: "ctl\x01.cer", data: []byte("x")},
	)
	a, err := open(t, b, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ok.cer":              "",
		"../../etc/evil.cer":  "path traversal",
		"/abs.cer":            "absolute",
		"C:\\win.cer":         "absolute",
		"sub\\..\\..\\up.cer": "path traversal",
		"nested.zip":          "nested archives",
		"disguised.cer":       "",
		"bomb.cer":            "compression ratio",
		"big.cer":             "larger than",
		"ctl\x01.cer":         "control characters",
	}
	if len(a.Entries) != len(want) {
		t.Fatalf("%d entries: %+v", len(a.Entries), a.Entries)
	}
	for _, e := range a.Entries {
		w, ok := want[e.Name]
		if !ok || (w == "" && e.Problem != "") || (w != "" && !strings.Contains(e.Problem, w)) {
			t.Errorf("%q: problem %q, want %q", e.Name, e.Problem, w)
		}
		if e.Problem != "" {
			if _, err := a.Read(e); err == nil {
				t.Errorf("%q was read despite its problem", e.Name)
			}
		}
	}
	for _, e := range a.Entries {
		switch e.Name {
		case "ok.cer":
			if data, err := a.Read(e); err != nil || string(data) != "cert" {
				t.Errorf("ok.cer: %q %v", data, err)
			}
		case "disguised.cer":
			if _, err := a.Read(e); err == nil || !strings.Contains(err.Error(), "nested") {
				t.Errorf("an archive inside a .cer was read: %v", err)
			}
		}
	}
}

// Archives refused whole: not a ZIP, too many entries, too much to unpack.
func TestOpen_RefusesArchives(t *testing.T) {
	if _, err := open(t, []byte("not a zip at all, just text"), DefaultLimits); err == nil {
		t.Error("text accepted as a ZIP")
	}
	if _, err := open(t, nil, DefaultLimits); err == nil {
		t.Error("empty file accepted")
	}
	many := make([]file, 11)
	for i := range many {
		many[i] = file{name: strings.Repeat("x", i+1) + ".cer", data: []byte("x")}
	}
	lim := DefaultLimits
	lim.MaxEntries = 10
	if _, err := open(t, build(t, many...), lim); err == nil || !strings.Contains(err.Error(), "more than 10 entries") {
		t.Errorf("too many entries: %v", err)
	}
	lim = DefaultLimits
	lim.MaxTotalUncompressed = 1000
	big := build(t, file{name: "a.cer", data: make([]byte, 600)}, file{name: "b.cer", data: make([]byte, 600)})
	if _, err := open(t, big, lim); err == nil || !strings.Contains(err.Error(), "unpacks to more") {
		t.Errorf("too large: %v", err)
	}
}

// An entry whose header understates its size is cut off at the declared
// size and fails; the central directory's count is checked before the
// directory is read.
func TestRead_LyingSizes(t *testing.T) {
	b := build(t, file{name: "a.cer", data: bytes.Repeat([]byte("z"), 5000), method: zip.Store})
	// Patch the central directory's uncompressed (and compressed) size to 10.
	cd := bytes.LastIndex(b, []byte("PK\x01\x02"))
	binary.LittleEndian.PutUint32(b[cd+20:], 10)
	binary.LittleEndian.PutUint32(b[cd+24:], 10)
	a, err := open(t, b, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := a.Read(a.Entries[0]); err == nil {
		t.Errorf("read %d bytes of an entry that declares 10", len(data))
	}
	// A directory claiming a million entries is refused from its end record alone.
	eocd := bytes.LastIndex(b, []byte("PK\x05\x06"))
	binary.LittleEndian.PutUint16(b[eocd+8:], 0xfffe)
	binary.LittleEndian.PutUint16(b[eocd+10:], 0xfffe)
	lim := DefaultLimits
	lim.MaxEntries = 100
	if _, err := open(t, b, lim); err == nil {
		t.Error("a huge declared entry count was accepted")
	}
}

func FuzzOpen(f *testing.F) {
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	// Archives the reader opens, so that the fuzzer mutates real entries:
	// stored and deflated certificates, a folder, a hostile name, a nested
	// archive.
	f.Add(build(f, file{name: "a@example.com.cer", data: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")}))
	f.Add(build(f,
		file{name: "dir/", data: nil},
		file{name: "E100.der", data: bytes.Repeat([]byte{0x30, 0x82}, 64), method: zip.Deflate},
		file{name: "../up.cer", data: []byte("x")},
		file{name: "nested.zip", data: build(f, file{name: "in.cer", data: []byte("y")})},
	))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Open(bytes.NewReader(b), int64(len(b)), DefaultLimits)
		if err != nil {
			return
		}
		for _, e := range a.Entries {
			_, _ = a.Read(e)
		}
	})
}

// An archive whose end record declares 5 entries while its directory holds
// 196,613 is refused before archive/zip parses the directory: what Open
// allocates stays small, whatever the directory holds.
func TestOpen_LyingEntryCount(t *testing.T) {
	const n = 3<<16 + 5
	for _, zip64 := range []bool{false, true} {
		b := ziptest.LyingArchive(n, zip64)
		if zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b))); err != nil || len(zr.File) != n {
			t.Fatalf("zip64 %v: the archive does not parse as the lie intends (%v)", zip64, err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := open(t, b, DefaultLimits)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "more than 10000 entries") {
			t.Errorf("zip64 %v: %v, want a refusal of more than 10000 entries", zip64, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
			t.Errorf("zip64 %v: Open allocated %d bytes for a refused directory", zip64, alloc)
		}
	}
	// The directory's bytes are bounded too: few entries with long names.
	if _, err := open(t, ziptest.LyingArchive(30000, false), Limits{MaxEntries: 100000, MaxDirectoryBytes: 1 << 20, MaxTotalUncompressed: 1 << 30, MaxEntrySize: 1 << 20, MaxRatio: 100}); err == nil || !strings.Contains(err.Error(), "directory is larger") {
		t.Errorf("a directory over MaxDirectoryBytes: %v", err)
	}
	// An honest archive of many entries still opens.
	if _, err := open(t, ziptest.LyingArchive(9000, false), DefaultLimits); err != nil {
		t.Errorf("9000 entries: %v", err)
	}
}
