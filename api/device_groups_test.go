package api_test

import (
	"net/http"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/devices"
)

type deviceGroupBody struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	MembersCount int    `json:"members_count"`
}

func TestDeviceGroups_API(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.conditional_access_policy.ALL")
		key, err := env.Store.Devices.InstallKey(t.Context(), env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		a := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		b := registerAgent(t, env, key, agentFacts("PC2", "S2"))

		resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: tok,
			Body: map[string]any{"name": "Kiosks", "description": "front desk", "device_ids": []string{a.id}}})
		if resp.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		var one struct{ Data deviceGroupBody }
		resp.JSON(t, &one)
		g := one.Data
		if g.Name != "Kiosks" || g.MembersCount != 1 {
			t.Fatalf("created %+v", g)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: tok,
			Body: map[string]any{"name": "kiosks"}}), 409, "00000105", "kiosks")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: tok,
			Body: map[string]any{"name": "x", "device_ids": []string{"123"}}}), 400, "00000109", "123")

		path := "/api/v1/protection/device-groups/" + g.ID
		resp = env.Do(apitest.Request{Method: "POST", Path: path + "/members", Token: tok, Body: map[string]any{"device_ids": []string{b.id}}})
		resp.JSON(t, &one)
		if resp.Status != 200 || one.Data.MembersCount != 2 {
			t.Fatalf("add members: %d %s", resp.Status, resp.Body)
		}
		resp = env.Get(path+"/members?limit=1&sort=-name", tok)
		var members struct {
			Data []struct{ ID, Name string }
			Meta struct {
				Total int `json:"total_no_of_objects"`
			}
		}
		resp.JSON(t, &members)
		if resp.Status != 200 || len(members.Data) != 1 || members.Data[0].Name != "PC2" || members.Meta.Total != 2 {
			t.Fatalf("members: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "DELETE", Path: path + "/members?ids=" + a.id, Token: tok})
		resp.JSON(t, &one)
		if resp.Status != 200 || one.Data.MembersCount != 1 {
			t.Fatalf("remove members: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "PATCH", Path: path, Token: tok, Body: map[string]any{"description": "lobby"}})
		resp.JSON(t, &one)
		if resp.Status != 200 || one.Data.Description != "lobby" || one.Data.Name != "Kiosks" {
			t.Fatalf("patch: %d %s", resp.Status, resp.Body)
		}
		resp = env.Get("/api/v1/protection/device-groups?filter=name%20eq%20%22Kiosks%22", tok)
		var list struct {
			Data []deviceGroupBody
			Meta struct {
				StartIndex int `json:"start_index"`
				Total      int `json:"total_no_of_objects"`
			}
		}
		resp.JSON(t, &list)
		if resp.Status != 200 || len(list.Data) != 1 || list.Meta.Total != 1 {
			t.Fatalf("list: %d %s", resp.Status, resp.Body)
		}
		// Another organization sees nothing of it.
		other := env.NewOrg("Other")
		otok := env.Token(other, "svc.conditional_access_policy.ALL")
		wantError(t, env.Get(path, otok), 404, "00000103", "")
		if e := env.Get(path, otok).ErrorBody(t); e.Title != "Device Group Not Found" {
			t.Errorf("title %q", e.Title)
		}
		if resp := env.Do(apitest.Request{Method: "DELETE", Path: path, Token: tok}); resp.Status != 204 {
			t.Fatalf("delete: %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Get(path, tok), 404, "00000103", "")
	})
}
