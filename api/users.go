package api

import (
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/identity"
	"iam/models/listing"
)

//go:generate go run ../cmd/usergen -part api -src ../models/identity/users.go -out users_gen.go

// primarySourceView is spec 2.1's primarySource with times in UTC, the
// view of models.User's PrimarySource (tagged custom: the generated view
// and writer call newPrimarySourceView and appendPrimarySourceJSON).
type primarySourceView struct {
	ApplicationName    string                      `json:"applicationName"`
	ApplicationService identity.ApplicationService `json:"applicationService"`
	CreationTime       time.Time                   `json:"creationTime"`
	IsEnabled          bool                        `json:"isEnabled"`
	ID                 string                      `json:"id"`
	ModifiedTime       time.Time                   `json:"modifiedTime"`
}

// localSource names this service as the source of records made through it.
var localSource = identity.ApplicationService{ID: "iam", Name: "iam", ServiceName: "Identity and Access Management", Logo: ""}

// localSourceName is the applicationName of records made through this service.
const localSourceName = "IAM"

// newPrimarySourceView is the view of the user's primary source: this
// service for a user made through it.
func newPrimarySourceView(u *identity.User) *primarySourceView {
	p := u.PrimarySource
	if p == nil {
		return &primarySourceView{
			ApplicationName: localSourceName, ApplicationService: localSource, IsEnabled: true,
			ID: models.FormatID(u.ID), CreationTime: u.CreatedAt.UTC(), ModifiedTime: u.UpdatedAt.UTC(),
		}
	}
	return &primarySourceView{ApplicationName: p.ApplicationName, ApplicationService: p.ApplicationService,
		CreationTime: p.CreationTime.UTC(), IsEnabled: p.IsEnabled, ID: p.ID, ModifiedTime: p.ModifiedTime.UTC()}
}

// listUsers: GET /users (cursor paging; licensing licensed, unlicensed or
// both, the default).
func (s *Server) listUsers(c *gin.Context) error {
	ctx := c.Request.Context()
	query := c.Request.URL.Query()
	params, err := listing.Parse(query, identity.UserListing)
	if err != nil {
		return err
	}
	licensing := identity.LicensingBoth
	switch vs := query["licensing"]; {
	case len(vs) > 1:
		return &listing.ParamError{Param: "licensing", Detail: "is given more than once"}
	case len(vs) == 1 && vs[0] != "":
		licensing = identity.Licensing(vs[0])
	}
	buf := userPages.Get().(*[]identity.User)
	users, meta, err := s.store.Users.ListInto(ctx, *buf, principal(c).OrgID, licensing, params)
	if err == nil {
		err = writeUserPage(c, users, params.Fields, meta)
		*buf = users
	}
	clear((*buf)[:cap(*buf)]) // a pooled slice holds no user
	*buf = (*buf)[:0]
	userPages.Put(buf)
	return err
}

// userPages recycles the slices pages of users are read into (a page of
// 100 users takes 55 KB), sparing the allocator and the collector.
var userPages = sync.Pool{New: func() any { return new([]identity.User) }}

// getUser: GET /users/{user_id}, {data: User}.
func (s *Server) getUser(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "user_id", identity.ErrUserNotFound)
	if err != nil {
		return err
	}
	user, err := s.store.Users.Get(ctx, principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newUserView(user)})
	return nil
}

// createUser: POST /users, 201 {data: User}.
func (s *Server) createUser(c *gin.Context) error {
	ctx := c.Request.Context()
	var req userCreateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	user, err := req.user(principal(c).OrgID)
	if err != nil {
		return err
	}
	if err := s.store.Users.Create(ctx, user, *req.Password); err != nil {
		return err
	}
	c.JSON(http.StatusCreated, gin.H{"data": newUserView(user)})
	return nil
}

// errAdminPassword refuses setting an administrator's password through the
// API: a token allowed to update users must not be able to sign in as an
// administrator, who may grant every scope.
func errAdminPassword() error {
	return &models.Error{Code: models.EFORBIDDEN, Field: "password", Detail: "the password of an administrator cannot be set through the API"}
}

// updateUser: PATCH /users/{user_id}, {data: User}. Only the fields sent
// change; manager null removes the manager. Setting (or removing) the
// password of an administrator is refused (403), whatever the token's
// scopes; any password change ends the user's tokens and sign-ins
// (models.UserStore.Update).
func (s *Server) updateUser(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "user_id", identity.ErrUserNotFound)
	if err != nil {
		return err
	}
	var req userPatchRequest
	if err = decodeJSON(c, &req); err != nil {
		return err
	}
	change := req.apply
	if req.Password != nil {
		change = func(u *identity.User) error {
			if u.IsAdmin() {
				return errAdminPassword()
			}
			return req.apply(u)
		}
	}
	user, err := s.store.Users.Update(ctx, principal(c).OrgID, id, change, req.Password)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newUserView(user)})
	return nil
}

// deleteUser: DELETE /users/{user_id}, 204.
func (s *Server) deleteUser(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "user_id", identity.ErrUserNotFound)
	if err != nil {
		return err
	}
	if err := s.store.Users.Delete(ctx, principal(c).OrgID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// deleteUsers: DELETE /users?ids=…, the bulk delete of spec 4.0 item 6.
func (s *Server) deleteUsers(c *gin.Context) error {
	return s.bulkDelete(c, identity.ErrUserNotFound, s.store.Users.DeleteMany)
}
