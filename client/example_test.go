package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"mime/multipart"
	"time"

	"golang.org/x/oauth2"

	"iam/client"
)

// Get a token from the service's authorization server, upload a CSV of
// users to enroll in Email OTP, wait for the job and page through its
// results. The application was registered with `iam clients create --type
// server --redirect-uri …`; the admin signs in and allows the request in the
// browser, which comes back to the redirect URI with the code.
func Example() {
	ctx := context.Background()
	const base = "http://127.0.0.1:8080"
	conf := &oauth2.Config{
		ClientID: "<client id>", ClientSecret: "<client secret>",
		RedirectURL: "https://app.example.com/callback",
		Scopes:      []string{"svc.quick_enrollment.ALL,svc.job.READ"},
		Endpoint: oauth2.Endpoint{AuthURL: base + "/oauth/v2/auth", TokenURL: base + "/oauth/v2/token",
			AuthStyle: oauth2.AuthStyleInHeader},
	}
	verifier := oauth2.GenerateVerifier()
	fmt.Println("Open:", conf.AuthCodeURL("state", oauth2.AccessTypeOffline, oauth2.S256ChallengeOption(verifier)))
	code := "<the code the redirect URI received>"
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		log.Fatal(err)
	}

	api, err := client.NewClientWithResponses(base, client.WithTokenSource(conf.TokenSource(ctx, tok)))
	if err != nil {
		log.Fatal(err)
	}
	configs, err := api.ListAuthnFactorConfigsWithResponse(ctx)
	if err != nil || configs.JSON200 == nil {
		log.Fatal(err, configs.Status())
	}
	var emailOTP string
	for _, c := range configs.JSON200.Data {
		if c.FactorType == client.FactorConfigFactorTypeEMAILOTP {
			emailOTP = c.Id
		}
	}

	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	_ = form.WriteField("factor_configs", emailOTP)
	file, _ := form.CreateFormFile("file", "users.csv")
	_, _ = file.Write([]byte("Primary Email,Email Address\nann@example.com,ann.otp@example.com\n"))
	_ = form.Close()
	// The Idempotency-Key makes the upload safe to retry: a retry with the
	// same key gets the first answer and starts no second job.
	key := client.IdempotencyKey("upload-users-2026-11-24")
	accepted, err := api.UploadEnrollmentCSVWithBodyWithResponse(ctx, &client.UploadEnrollmentCSVParams{IdempotencyKey: &key},
		form.FormDataContentType(), &body)
	if err != nil || accepted.JSON202 == nil {
		log.Fatal(err, accepted.Status())
	}
	jobID := accepted.JSON202.Data.Id

	for {
		job, err := api.GetJobWithResponse(ctx, jobID)
		if err != nil || job.JSON200 == nil {
			log.Fatal(err, job.Status())
		}
		if s := job.JSON200.Status; s != client.JobStatusQUEUED && s != client.JobStatusRUNNING {
			fmt.Println("job", jobID, s)
			break
		}
		time.Sleep(time.Second)
	}

	limit := client.Limit200(100)
	for from := 0; ; from += int(limit) {
		f := client.From(from)
		page, err := api.ListJobResultsWithResponse(ctx, jobID, &client.ListJobResultsParams{Limit: &limit, From: &f})
		if err != nil || page.JSON200 == nil {
			log.Fatal(err, page.Status())
		}
		for _, r := range page.JSON200.Data {
			fmt.Println(*r.Row, *r.Status, r.Id)
		}
		if from+int(limit) >= page.JSON200.Meta.TotalNoOfObjects {
			break
		}
	}
}
