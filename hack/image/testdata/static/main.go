// Command static is the image test's binary for the platforms other than
// the machine's: small, static, built as the operator is.
package main

import "fmt"

func main() { fmt.Println("static") }
