// Package client is the typed Go client of the service's /api/v1 surface,
// generated from api/openapi.yaml by oapi-codegen (go generate ./client;
// TestGenerated_UpToDate fails when the generated code is out of date).
//
// Every operation of the document is a method named after its operationId
// (ListUsers, UploadEnrollmentCSVWithBody, ListNotificationRuns …), on
// Client (raw *http.Response) and ClientWithResponses (parsed bodies: JSON200,
// JSON400 …). Authenticate with WithServiceToken, or with an oauth2.TokenSource
// through WithTokenSource.
package client

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.5.0 -config oapi-codegen.yaml ../api/openapi.yaml
