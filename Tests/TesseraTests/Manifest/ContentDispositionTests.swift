import Foundation
import Testing

@testable import Tessera

/// `ContentDisposition.fileName(_:)`: RFC 6266 and RFC 8187 (`filename*`).
@Suite struct ContentDispositionTests {
    // MARK: RFC 6266, Appendix D

    @Test func rfc6266TokenForm() {
        #expect(ContentDisposition.fileName("Attachment; filename=example.html") == "example.html")
    }

    @Test func rfc6266UppercaseNamesAndSpaceBeforeQuotedValue() {
        #expect(ContentDisposition.fileName(#"INLINE; FILENAME= "an example.html""#) == "an example.html")
    }

    @Test func rfc6266ExtendedUTF8WithSpaceAfterEquals() {
        #expect(ContentDisposition.fileName("attachment; filename*= UTF-8''%e2%82%ac%20rates") == "€ rates")
    }

    @Test func rfc6266ExtendedWinsOverPlainWhicheverComesFirst() {
        #expect(ContentDisposition.fileName(#"attachment; filename="EURO rates"; filename*=utf-8''%e2%82%ac%20rates"#) == "€ rates")
        #expect(ContentDisposition.fileName(#"attachment; filename*=utf-8''%e2%82%ac%20rates; filename="EURO rates""#) == "€ rates")
    }

    // MARK: Quoted strings and tokens

    @Test func quotedWithEscapedQuotesAndBackslashes() {
        #expect(ContentDisposition.fileName(#"attachment; filename="a \"quoted\" name.txt""#) == #"a "quoted" name.txt"#)
        // A quoted-pair of any character stands for the character itself.
        #expect(ContentDisposition.fileName(#"attachment; filename="\e\x\a\m\p\l\e.txt""#) == "example.txt")
    }

    @Test func quotedValueMayHoldSemicolonsAndEquals() {
        #expect(ContentDisposition.fileName(#"attachment; filename="a;b=c.txt"; size=10"#) == "a;b=c.txt")
    }

    @Test func tokenValueEndsAtSemicolonAndIsTrimmed() {
        #expect(ContentDisposition.fileName("attachment; filename=report.pdf ; size=100") == "report.pdf")
        #expect(ContentDisposition.fileName("attachment;filename=report.pdf") == "report.pdf")
    }

    @Test func otherParametersAreIgnored() {
        #expect(ContentDisposition.fileName(#"attachment; creation-date="Wed, 12 Feb 1997 16:29:51 -0500"; filename="x.bin""#) == "x.bin")
    }

    @Test func parameterNameIsCaseInsensitive() {
        #expect(ContentDisposition.fileName("attachment; FileName=a.txt") == "a.txt")
        #expect(ContentDisposition.fileName("attachment; FILENAME*=UTF-8''b.txt") == "b.txt")
    }

    // MARK: filename* (RFC 8187)

    @Test func extendedUTF8WithLanguage() {
        #expect(ContentDisposition.fileName("attachment; filename*=UTF-8'en'na%C3%AFve%20file.txt") == "naïve file.txt")
    }

    @Test func extendedISO88591() {
        #expect(ContentDisposition.fileName("attachment; filename*=iso-8859-1'en'%A3%20rates") == "£ rates")
        #expect(ContentDisposition.fileName("attachment; filename*=ISO-8859-1''caf%E9.txt") == "café.txt")
    }

    @Test func unknownCharsetIsIgnoredInFavourOfPlainName() {
        #expect(ContentDisposition.fileName(#"attachment; filename*=x-klingon''abc; filename="plain.txt""#) == "plain.txt")
        #expect(ContentDisposition.fileName("attachment; filename*=x-klingon''abc") == nil)
    }

    @Test func malformedExtendedValuesFallBackToPlainName() {
        // Not charset'lang'value.
        #expect(ContentDisposition.fileName(#"attachment; filename*=UTF-8abc; filename="plain.txt""#) == "plain.txt")
        // Invalid UTF-8 after decoding.
        #expect(ContentDisposition.fileName(#"attachment; filename*=UTF-8''%FF%FE; filename="plain.txt""#) == "plain.txt")
        // A broken percent escape in ISO-8859-1.
        #expect(ContentDisposition.fileName(#"attachment; filename*=iso-8859-1''%G1; filename="plain.txt""#) == "plain.txt")
    }

    // MARK: Paths and missing names

    @Test func pathComponentsAreStripped() {
        #expect(ContentDisposition.fileName(#"attachment; filename="../../etc/passwd""#) == "passwd")
        #expect(ContentDisposition.fileName(#"attachment; filename="/tmp/x/y.txt""#) == "y.txt")
        #expect(ContentDisposition.fileName(#"attachment; filename="C:\\Windows\\evil.exe""#) == "evil.exe")
        #expect(ContentDisposition.fileName("attachment; filename*=UTF-8''..%2F..%2Fsecret.txt") == "secret.txt")
        #expect(ContentDisposition.fileName(#"attachment; filename="dir/""#) == "dir")
    }

    @Test func onlySeparatorsIsNoName() {
        #expect(ContentDisposition.fileName(#"attachment; filename="/""#) == nil)
        #expect(ContentDisposition.fileName(#"attachment; filename="//\\""#) == nil)
    }

    @Test func missingOrEmptyFileNameIsNil() {
        #expect(ContentDisposition.fileName("attachment") == nil)
        #expect(ContentDisposition.fileName("inline") == nil)
        #expect(ContentDisposition.fileName("attachment; size=100") == nil)
        #expect(ContentDisposition.fileName(#"attachment; filename="""#) == nil)
        #expect(ContentDisposition.fileName("attachment; filename=") == nil)
        #expect(ContentDisposition.fileName("") == nil)
    }

    @Test func dotDotIsReturnedAsIsForTheCallerToSanitize() {
        // ContentDisposition keeps the last component; DirectEntity sanitizes it.
        let name = ContentDisposition.fileName(#"attachment; filename="..""#)
        #expect(name == "..")
        #expect(SafePath.sanitizedFileName(name ?? "") == "download")
    }
}
