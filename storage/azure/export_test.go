package azure

// NewOpener is a fresh opener that reads the environment as the first
// azblob URL of a process does.
var NewOpener = newOpener
