// Package modeltest holds the fixtures the store tests of several areas
// share: organizations, users, jobs and registered devices made through the
// real store.
package modeltest
