package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"iam/models"
	"iam/models/hooks"
	"iam/models/listing"
	"iam/workflows"
)

// Event hooks (/event-hooks, docs/event-hooks.md): endpoints that receive
// the organization's audit events, signed per the Standard Webhooks
// specification; their deliveries and retries.

const eventHooksPath = "/event-hooks"

// eventHookMaxBody bounds a hook's create or update body.
const eventHookMaxBody = 64 << 10

type eventHookView struct {
	ID               string     `json:"id"`
	URL              string     `json:"url"`
	Description      string     `json:"description"`
	EventTypes       []string   `json:"event_types"`
	Enabled          bool       `json:"enabled"`
	DisabledReason   string     `json:"disabled_reason"`
	FailingSince     *time.Time `json:"failing_since"`
	CreatedTime      time.Time  `json:"created_time"`
	LastModifiedTime time.Time  `json:"last_modified_time"`
}

func newEventHookView(h *hooks.Hook) eventHookView {
	return eventHookView{ID: models.FormatID(h.ID), URL: h.URL, Description: h.Description, EventTypes: h.EventTypes,
		Enabled: h.Enabled, DisabledReason: h.DisabledReason, FailingSince: h.FailingSince,
		CreatedTime: h.CreatedAt, LastModifiedTime: h.UpdatedAt}
}

// eventHookCreated is the answer of a create: the hook and its secret,
// shown this once.
type eventHookCreated struct {
	eventHookView
	Secret string `json:"secret"`
}

type hookAttemptView struct {
	Time       time.Time `json:"time"`
	StatusCode *int      `json:"status_code"`
	LatencyMS  int64     `json:"latency_ms"`
	Error      string    `json:"error"`
}

type hookDeliveryView struct {
	ID              string            `json:"id"`
	WebhookID       string            `json:"webhook_id"`
	EventID         *string           `json:"event_id"`
	EventType       string            `json:"event_type"`
	Status          string            `json:"status"`
	AttemptCount    int               `json:"attempt_count"`
	Attempts        []hookAttemptView `json:"attempts"`
	NextAttemptTime *time.Time        `json:"next_attempt_time"`
	CreatedTime     time.Time         `json:"created_time"`
}

func newHookDeliveryView(d *hooks.Delivery) hookDeliveryView {
	v := hookDeliveryView{ID: models.FormatID(d.ID), WebhookID: d.WebhookID(), EventType: d.EventType, Status: d.Status,
		AttemptCount: d.AttemptCount, Attempts: make([]hookAttemptView, len(d.Attempts)), NextAttemptTime: d.NextAttemptAt,
		CreatedTime: d.CreatedAt}
	if d.EventID != 0 {
		id := models.FormatID(d.EventID)
		v.EventID = &id
	}
	for i, a := range d.Attempts {
		av := hookAttemptView{Time: a.Time, LatencyMS: a.LatencyMS, Error: a.Error}
		if a.StatusCode != 0 {
			code := a.StatusCode
			av.StatusCode = &code
		}
		v.Attempts[i] = av
	}
	return v
}

type eventHookRequest struct {
	URL         string   `json:"url" validate:"required"`
	EventTypes  []string `json:"event_types" validate:"required"`
	Description string   `json:"description"`
	Enabled     *bool    `json:"enabled"`
}

type eventHookPatch struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"event_types"`
	Description *string   `json:"description"`
	Enabled     *bool     `json:"enabled"`
}

// startHookWorkflow starts the hook's delivery workflow when it is not
// running. A failure is logged only: the supervisor schedule starts it
// within a minute.
func (s *Server) startHookWorkflow(c *gin.Context, h *hooks.Hook) {
	if s.deps.Temporal == nil || !h.Enabled {
		return
	}
	queue := workflows.TaskQueue
	if s.deps.Jobs != nil {
		queue = cmp.Or(s.deps.Jobs.TaskQueue, queue)
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	_, err := s.deps.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.EventHookWorkflowID(h.ID),
		TaskQueue:                queue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("event hook %d deliveries", h.ID),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrEventHookID.ValueSet(models.FormatID(h.ID)),
			workflows.AttrOrgID.ValueSet(models.FormatID(h.OrgID)),
		),
	}, workflows.EventHookWorkflowName, workflows.EventHookInput{HookID: h.ID, OrgID: h.OrgID})
	if err != nil {
		logger(c).Warn("start event hook workflow: the supervisor will", "hook_id", h.ID, "error", err)
	}
}

// listEventHooks: GET /event-hooks (offset paging).
func (s *Server) listEventHooks(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), hooks.HookListing)
	if err != nil {
		return err
	}
	list, meta, err := s.store.Hooks.List(c.Request.Context(), principal(c).OrgID, params)
	if err != nil {
		return err
	}
	writeList(c, viewsOf(list, newEventHookView), params.Fields, meta)
	return nil
}

// createEventHook: POST /event-hooks, 201 {data: hook with its secret}.
func (s *Server) createEventHook(c *gin.Context) error {
	var req eventHookRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	h := &hooks.Hook{OrgID: principal(c).OrgID, URL: req.URL, Description: req.Description, EventTypes: req.EventTypes, Enabled: true}
	if req.Enabled != nil {
		h.Enabled = *req.Enabled
	}
	sec, err := s.store.Hooks.Create(c.Request.Context(), h)
	if err != nil {
		return err
	}
	s.startHookWorkflow(c, h)
	c.JSON(http.StatusCreated, gin.H{"data": eventHookCreated{eventHookView: newEventHookView(h), Secret: sec}})
	return nil
}

func hookID(c *gin.Context) (int64, error) {
	return pathID(c, "hook_id", hooks.ErrHookNotFound)
}

// getEventHook: GET /event-hooks/{hook_id}.
func (s *Server) getEventHook(c *gin.Context) error {
	id, err := hookID(c)
	if err != nil {
		return err
	}
	h, err := s.store.Hooks.Get(c.Request.Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newEventHookView(h)})
	return nil
}

// updateEventHook: PATCH /event-hooks/{hook_id}; enabled: true re-enables a
// disabled hook.
func (s *Server) updateEventHook(c *gin.Context) error {
	id, err := hookID(c)
	if err != nil {
		return err
	}
	var req eventHookPatch
	if err = decodeJSON(c, &req); err != nil {
		return err
	}
	ch := hooks.HookChange{URL: req.URL, Description: req.Description, Enabled: req.Enabled}
	if req.EventTypes != nil {
		ch.EventTypes = *req.EventTypes
		if ch.EventTypes == nil {
			ch.EventTypes = []string{}
		}
	}
	h, err := s.store.Hooks.Update(c.Request.Context(), principal(c).OrgID, id, ch)
	if err != nil {
		return err
	}
	s.startHookWorkflow(c, h)
	c.JSON(http.StatusOK, gin.H{"data": newEventHookView(h)})
	return nil
}

// deleteEventHook: DELETE /event-hooks/{hook_id}, 204. Its workflow ends at
// its next look at the hook.
func (s *Server) deleteEventHook(c *gin.Context) error {
	id, err := hookID(c)
	if err != nil {
		return err
	}
	if err = s.store.Hooks.Delete(c.Request.Context(), principal(c).OrgID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// rotateEventHookSecret: POST /event-hooks/{hook_id}/rotate-secret: the new
// secret, shown once; the previous one signs too for 24 hours.
func (s *Server) rotateEventHookSecret(c *gin.Context) error {
	id, err := hookID(c)
	if err != nil {
		return err
	}
	sec, err := s.store.Hooks.RotateSecret(c.Request.Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": gin.H{"secret": sec,
		"previous_secret_expires_time": time.Now().UTC().Add(hooks.RotationOverlap).Truncate(time.Second)}})
	return nil
}

// testEventHook: POST /event-hooks/{hook_id}/test, 202 {data: delivery}: a
// hook.test event queued for the hook.
func (s *Server) testEventHook(c *gin.Context) error {
	id, err := hookID(c)
	if err != nil {
		return err
	}
	org := principal(c).OrgID
	d, err := s.store.Hooks.Test(c.Request.Context(), org, id)
	if err != nil {
		return err
	}
	if h, err := s.store.Hooks.Get(c.Request.Context(), org, id); err == nil {
		s.startHookWorkflow(c, h)
	}
	c.JSON(http.StatusAccepted, gin.H{"data": newHookDeliveryView(d)})
	return nil
}

// listEventHookDeliveries: GET /event-hooks/{hook_id}/deliveries (offset
// paging; filter on status, event_type, created_time).
func (s *Server) listEventHookDeliveries(c *gin.Context) error {
	id, err := hookID(c)
	if err != nil {
		return err
	}
	params, err := listing.Parse(c.Request.URL.Query(), hooks.DeliveryListing)
	if err != nil {
		return err
	}
	list, meta, err := s.store.Hooks.ListDeliveries(c.Request.Context(), principal(c).OrgID, id, params)
	if err != nil {
		return err
	}
	writeList(c, viewsOf(list, newHookDeliveryView), params.Fields, meta)
	return nil
}

// retryEventHookDelivery: POST /event-hooks/{hook_id}/deliveries/{delivery_id}/retry,
// 202 {data: delivery}: due again now, same webhook-id.
func (s *Server) retryEventHookDelivery(c *gin.Context) error {
	id, err := hookID(c)
	if err != nil {
		return err
	}
	did, err := pathID(c, "delivery_id", hooks.ErrDeliveryNotFound)
	if err != nil {
		return err
	}
	org := principal(c).OrgID
	d, err := s.store.Hooks.RetryDelivery(c.Request.Context(), org, id, did)
	if err != nil {
		return err
	}
	if h, err := s.store.Hooks.Get(c.Request.Context(), org, id); err == nil {
		s.startHookWorkflow(c, h)
	}
	c.JSON(http.StatusAccepted, gin.H{"data": newHookDeliveryView(d)})
	return nil
}
