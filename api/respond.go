package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/go-playground/validator/v10"

	"iam/models"
	"iam/models/protection"
)

// handle adapts a handler that returns its error: a non-nil error is
// answered by abortWithError.
func handle(h func(c *gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			abortWithError(c, err)
		}
	}
}

// validate checks request structs by their `validate` tags; errors name the
// JSON field.
var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	return v
}()

// mergePatchType is the media type of a JSON merge patch (RFC 7396): a
// PATCH body may be sent as it or as application/json.
const mergePatchType = "application/merge-patch+json"

// decodeJSON reads the JSON body into v and validates it: the one way a
// request body (a PATCH's too, through mergeRequest) becomes a request
// struct. Unknown fields, wrong types, an empty, null or malformed body, a
// string that is not NUL-free UTF-8 (checkText), a body over the limit and
// a Content-Type other than JSON each give their own clear error.
func decodeJSON(c *gin.Context, v any) error {
	if err := jsonMediaType(c); err != nil {
		return err
	}
	return decodeRequest(c.Request.Body, v)
}

// jsonMediaType refuses (415) a body that is not application/json, or
// application/merge-patch+json on a PATCH.
func jsonMediaType(c *gin.Context) error {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err == nil && (mt == "application/json" || mt == mergePatchType && c.Request.Method == http.MethodPatch) {
		return nil
	}
	if c.Request.Method == http.MethodPatch {
		return newAPIError(http.StatusUnsupportedMediaType, CodeMediaType, "Unsupported Media Type", "the request body must be application/json or application/merge-patch+json")
	}
	return newAPIError(http.StatusUnsupportedMediaType, CodeMediaType, "Unsupported Media Type", "the request body must be application/json")
}

// decodeRequest reads r whole and decodes it (decodeBody).
func decodeRequest(r io.Reader, v any) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return jsonError(err)
	}
	return decodeBody(body, v)
}

// decodeBody decodes one JSON value from body into v, refusing a null body,
// strings that break the text rule (checkText) and unknown fields, and
// validates it (validateRequest).
func decodeBody(body []byte, v any) error {
	if err := checkText(body); err != nil {
		return err
	}
	if string(bytes.TrimSpace(body)) == "null" {
		return errInvalidBody("the body must not be null")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errInvalidBody("the body holds more than one JSON value")
	}
	return validateRequest(v)
}

// requestChecker is a request struct with rules its validate tags cannot
// say (a field required by one request but not another that shares the
// struct). check runs after the tags pass and answers with models.Invalid
// or a *models.Error like theirs.
type requestChecker interface{ check() error }

// validateRequest runs v's validate tags, then its check when it has one.
func validateRequest(v any) error {
	if err := validateStruct(v); err != nil {
		return err
	}
	if rc, ok := v.(requestChecker); ok {
		return rc.check()
	}
	return nil
}

// jsonError explains a JSON decoding failure.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var tooLarge *http.MaxBytesError
	var field *models.Error
	switch {
	case errors.As(err, &tooLarge):
		return err
	case errors.As(err, &field):
		// A field's own UnmarshalJSON (optionalRef) names the field.
		return err
	case errors.Is(err, io.EOF):
		return errInvalidBody("the request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errInvalidBody("the request body is not complete JSON")
	case errors.As(err, &syntax):
		return errInvalidBody("malformed JSON at byte %d", syntax.Offset)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return errInvalidBody("the body must be a JSON %s", typeErr.Type.Kind())
		}
		if typeErr.Type == reflect.TypeFor[protection.RefID]() {
			// An id of the wrong shape (0, "0", -3, "x"), not of the
			// wrong JSON type.
			return models.Invalid(typeErr.Field, "must be an id: a positive integer as a digit string")
		}
		return models.Invalid(typeErr.Field, "must be of type %s", jsonTypeName(typeErr.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return models.Invalid(field, "is not a known field")
	}
	return errInvalidBody("the body is not valid JSON")
}

func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// validateStruct runs the validator and reports every broken field: the
// first in detail, all of them in causes.
func validateStruct(v any) error {
	err := validate.Struct(v)
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return nil
	}
	out := &models.Error{Code: models.EINVALID}
	for i, fe := range verrs {
		field := strings.SplitN(fe.Namespace(), ".", 2)
		name := fe.Field()
		if len(field) == 2 {
			name = field[1]
		}
		detail := ruleText(fe)
		if i == 0 {
			out.Field, out.Detail = name, detail
		}
		out.Causes = append(out.Causes, models.Cause{Title: name, Detail: detail})
	}
	return out
}

// ruleText says in words what a validation tag asks for.
func ruleText(fe validator.FieldError) string {
	switch fe.Tag() {
	case "required":
		return "is required"
	case "email":
		return "must be an email address"
	case "oneof":
		return "must be one of: " + strings.ReplaceAll(fe.Param(), " ", ", ")
	case "max":
		return "must be at most " + fe.Param() + lengthUnit(fe)
	case "min":
		return "must be at least " + fe.Param() + lengthUnit(fe)
	case "len":
		return "must have length " + fe.Param()
	case "url", "http_url":
		return "must be a URL"
	case "iso3166_1_alpha2":
		return "must be an ISO 3166-1 alpha-2 country code"
	case "e164":
		return "must be a phone number in E.164 form"
	}
	return fmt.Sprintf("breaks the rule %q", fe.Tag())
}

func lengthUnit(fe validator.FieldError) string {
	switch fe.Kind() {
	case reflect.String:
		return " characters"
	case reflect.Slice, reflect.Map, reflect.Array:
		return " items"
	}
	return ""
}

// pathID reads an id path parameter. A value that is no id cannot name a row,
// so it answers like a missing one: notFound.
func pathID(c *gin.Context, name string, notFound error) (int64, error) {
	id, err := models.ParseID(name, c.Param(name))
	if err != nil {
		return 0, notFound
	}
	return id, nil
}
