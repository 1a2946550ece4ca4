import HomewardProtocol

/// A user as others see them: the wire model's `{username, name}`.
public typealias UserProfile = UserInfo
