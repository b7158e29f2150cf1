package modeltest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models/devices"
	"iam/models/identity"
	"iam/models/secret"
	"iam/models/store"
)

// DeviceFixture is an organization with an agent installation key and
// users, and its device store.
type DeviceFixture struct {
	Store *store.Store
	Dev   *devices.DeviceStore
	Org   *identity.Organization
	Key   string
	Users []*identity.User
}

// NewDeviceFixture makes an organization with n users and its device
// installation key, over a store that seals with a fixed test key.
func NewDeviceFixture(t *testing.T, db *bun.DB, users int) *DeviceFixture {
	t.Helper()
	box, err := secret.NewBox(bytes.Repeat([]byte{7}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	f := &DeviceFixture{Store: store.NewStore(db).SealBlobs(box)}
	f.Dev = f.Store.Devices
	f.Org = NewOrg(t, f.Store)
	if f.Key, err = f.Dev.InstallKey(t.Context(), f.Org.ID, devices.AgentDevice); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < users; i++ {
		u := &identity.User{OrgID: f.Org.ID, Email: fmt.Sprintf("dev%d@example.com", i), Status: identity.UserActive}
		if err := f.Store.Users.Create(t.Context(), u, ""); err != nil {
			t.Fatal(err)
		}
		f.Users = append(f.Users, u)
	}
	return f
}

// Facts are the facts of a Windows device named name.
func Facts(name, serial string) devices.DeviceFacts {
	return devices.DeviceFacts{Name: name, OSType: "Windows", SerialNumber: serial, JoinType: "ADJoined",
		AgentVersion: "1.0.0", IPAddress: "10.0.0.1", DNSHostname: strings.ToLower(name) + ".corp"}
}

// Register registers a device with facts fa, failing the test on error.
func (f *DeviceFixture) Register(t *testing.T, fa devices.DeviceFacts) (*devices.Device, string) {
	t.Helper()
	d, sec, err := f.Dev.Register(t.Context(), devices.Registration{InstallationKey: f.Key, AgentType: devices.AgentDevice,
		Platform: "windows", Facts: fa})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return d, sec
}

// CheckIn authenticates as the agent and checks in.
func (f *DeviceFixture) CheckIn(t *testing.T, id int64, sec string, in devices.CheckIn) ([]devices.Command, error) {
	t.Helper()
	d, err := f.Dev.AuthenticateCheckIn(t.Context(), id, sec)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return f.Dev.CheckIn(t.Context(), d, &in)
}

// ReRegister registers fa again, presenting the credential id:sec when id
// is not zero.
func (f *DeviceFixture) ReRegister(t *testing.T, fa devices.DeviceFacts, id int64, sec string, max int) (*devices.Device, string, error) {
	t.Helper()
	return f.Dev.Register(t.Context(), devices.Registration{InstallationKey: f.Key, AgentType: devices.AgentDevice,
		Platform: "windows", Facts: fa, DeviceID: id, DeviceSecret: sec, MaxDevices: max})
}
