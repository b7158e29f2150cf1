package models

// UserListColumns exposes the columns a list of users reads to the tests.
var UserListColumns = userListColumns

// SignInColumns exposes the columns lists leave out to the tests.
var SignInColumns = signInColumns
