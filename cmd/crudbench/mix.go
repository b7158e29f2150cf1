package main

import (
	"fmt"
	"strconv"
	"strings"
)

// opKind is what one step of a client does.
type opKind int

const (
	opCreate opKind = iota // POST /users
	opPatch                // PATCH /users/{id}
	opList                 // GET /users?limit=100
	opMember               // POST /groups/{id}/members or DELETE …?ids=, in turn
	opDelete               // DELETE /users/{id}
	numOps
)

// reqKind is a request's kind in the figures: the member step is two.
type reqKind int

const (
	reqCreate reqKind = iota
	reqPatch
	reqList
	reqAddMember
	reqRemoveMember
	reqDelete
	numReqs
)

var reqNames = [numReqs]string{"create", "patch", "list", "add member", "remove member", "delete"}

func (k reqKind) String() string { return reqNames[k] }

// mix is the percentage of each step, adding up to 100.
type mix [numOps]int

// parseMix reads "create,patch,list,member,delete" percentages.
func parseMix(s string) (mix, error) {
	var m mix
	parts := strings.Split(s, ",")
	if len(parts) != int(numOps) {
		return m, fmt.Errorf("-mix %q: want %d percentages (create, patch, list, member, delete)", s, numOps)
	}
	sum := 0
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return m, fmt.Errorf("-mix %q: %q is not a percentage", s, p)
		}
		m[i] = n
		sum += n
	}
	if sum != 100 {
		return m, fmt.Errorf("-mix %q adds up to %d, not 100", s, sum)
	}
	return m, nil
}

// pick is the step a roll in [0, 100) falls on.
func (m mix) pick(roll int) opKind {
	for k, pct := range m {
		if roll < pct {
			return opKind(k)
		}
		roll -= pct
	}
	return numOps - 1
}

func (m mix) String() string {
	return fmt.Sprintf("create %d%%, patch %d%%, list %d%%, group member add/remove %d%%, delete %d%%",
		m[opCreate], m[opPatch], m[opList], m[opMember], m[opDelete])
}
