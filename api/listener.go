package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// A request net/http cannot parse (a control character in a header value,
// a malformed Host, headers over the limit, an unknown transfer coding)
// never reaches the API: the server writes a text/plain answer on the
// connection itself ("HTTP/1.1 400 Bad Request" with the errorHeaders below)
// and closes it. Listener wraps the server's listener so that this answer,
// recognised by its exact shape, goes out with the API's JSON error body
// instead, as every other error does.

// serverErrorHeaders are the headers net/http writes (server.go, "const
// errorHeaders") after the status line of an answer of its own. A handler's
// answer never has them in this order: net/http writes a handler's headers
// sorted, Connection before Content-Type.
const serverErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// Listener wraps ln for an http.Server serving this API (iam serve and
// dev): net/http's own error answers get the JSON error body.
func Listener(ln net.Listener) net.Listener { return errorBodyListener{ln} }

type errorBodyListener struct{ net.Listener }

func (l errorBodyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &errorBodyConn{Conn: c}, nil
}

// errorBodyConn rewrites a write that is net/http's own error answer.
// net/http writes that answer with one Write on the connection, unbuffered.
type errorBodyConn struct{ net.Conn }

func (c *errorBodyConn) Write(p []byte) (int, error) {
	if out, ok := rewriteServerError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite and ReadFrom keep what net/http uses of a *net.TCPConn: the
// half close before it hangs up on a client, and sendfile.
func (c *errorBodyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *errorBodyConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// rewriteServerError returns the JSON answer for p when p is net/http's
// own error answer: "HTTP/1.1 <code> <text>[: <reason>]", the error
// headers, then the same status text as body.
func rewriteServerError(p []byte) ([]byte, bool) {
	// Most writes are a handler's answer or a piece of its body: the prefix
	// tells them apart before any search.
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 4")) && !bytes.HasPrefix(p, []byte("HTTP/1.1 5")) {
		return nil, false
	}
	statusLine, body, ok := bytes.Cut(p, []byte(serverErrorHeaders))
	if !ok || bytes.IndexByte(statusLine, '\n') >= 0 {
		return nil, false
	}
	status := string(statusLine[len("HTTP/1.1 "):])
	if len(status) < 4 || status[3] != ' ' {
		return nil, false
	}
	code, err := strconv.Atoi(status[:3])
	if err != nil || code < 400 || code > 599 {
		return nil, false
	}
	// The body repeats the status ("400 Bad Request"), or for an unknown
	// transfer coding says so: nothing a client sent is echoed.
	if !bytes.HasPrefix(body, []byte(status[:3])) && !bytes.Equal(body, []byte("Unsupported transfer encoding")) {
		return nil, false
	}
	_, reason, _ := strings.Cut(status[4:], ": ")
	if reason == "" && code == http.StatusNotImplemented {
		reason = string(body)
	}
	return serverErrorAnswer(code, reason), true
}

// serverErrorAnswer is the whole HTTP answer of one of net/http's own
// errors, with the API's error body.
func serverErrorAnswer(code int, reason string) []byte {
	e := newAPIError(code, CodeInvalidParameter, "Invalid Parameter", "the request is malformed")
	switch code {
	case http.StatusBadRequest:
		e.Body.Detail = "the request is malformed: a header name or value holds a character HTTP does not allow, or the request line or Host is invalid"
	case http.StatusRequestHeaderFieldsTooLarge:
		e.Body.Code, e.Body.Title, e.Body.Detail = CodeTooLarge, "Request Too Large", "the request's headers are too large"
	case http.StatusNotImplemented:
		e.Body.Code, e.Body.Title = CodeInvalidBody, "Invalid Request Body"
	}
	if reason != "" {
		e.Body.Detail += " (" + strings.ToLower(reason) + ")"
	}
	body, _ := json.Marshal(ErrorBody{Error: e.Body})
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}
